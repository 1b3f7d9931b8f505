import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { registerBenchCommand } from "../../../src/cli/commands/bench.js";
import { registerCeilingsCommand } from "../../../src/cli/commands/ceilings.js";
import { registerCheckCommand } from "../../../src/cli/commands/check.js";
import { registerStartCommand } from "../../../src/cli/commands/start.js";
import type { CliErrorJson } from "../../../src/cli/cliErrors.js";
import { runCommand } from "./runCommand.js";

const NO_GPU = { probeGpu: () => ({ ok: false as const, reason: "no device here (test)" }) };

// dist/test/cpu/cli -> dist/src/cli/cli.js
const cli = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../src/cli/cli.js");

function flashmla(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [cli, ...args], {
    env: { ...process.env, FLASHMLA_LIBCUDA: "/nonexistent/flashmla-test/libcuda.so.1", FLASHMLA_CACHE_DIR: "/nonexistent/flashmla-test-cache" },
    encoding: "utf8",
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** stdout parsed as the error document, checked for the fields every failure carries. */
function errorJson(stdout: string, kind: string, command: string, exitCode: number): CliErrorJson["error"] {
  const j = JSON.parse(stdout) as CliErrorJson;
  assert.deepEqual(Object.keys(j), ["error"]);
  assert.equal(j.error.kind, kind);
  assert.equal(j.error.command, command);
  assert.equal(j.error.exitCode, exitCode);
  assert.equal(typeof j.error.message, "string");
  return j.error;
}

test("every GPU command with --json reports no GPU as { error } on stdout, exit 1", async () => {
  const runs: Array<[typeof registerBenchCommand, string[], string]> = [
    [registerBenchCommand, ["bench", "--json"], "bench"],
    [registerBenchCommand, ["bench", "--case", "dense-b1", "--json", "r.json"], "bench"],
    [registerCheckCommand, ["check", "--json"], "check"],
    [registerCeilingsCommand, ["ceilings", "--json"], "ceilings"],
  ];
  for (const [register, args, name] of runs) {
    const r = await runCommand(register, args, NO_GPU);
    assert.equal(r.code, 1, args.join(" "));
    const e = errorJson(r.out, "no-gpu", `flashmla ${name}`, 1);
    assert.equal(e.message, "no GPU: no device here (test)");
    // Humans still get the message on stderr.
    assert.match(r.err, new RegExp(`^flashmla ${name}: no GPU: no device here \\(test\\)\\n`));
  }
  // Without --json stdout stays empty, as before.
  assert.equal((await runCommand(registerBenchCommand, ["bench"], NO_GPU)).out, "");
});

test("every command with --json reports a bad command line as { error } on stdout, exit 2", async () => {
  const runs: Array<[typeof registerBenchCommand, string[], string, RegExp]> = [
    [registerBenchCommand, ["bench", "--case", "nope", "--json"], "bench", /^unknown case 'nope'$/],
    [registerBenchCommand, ["bench", "--json", "--iters", "3"], "bench", /argument '3' is invalid/],
    [registerBenchCommand, ["bench", "--json", "--bogus"], "bench", /^unknown option '--bogus'$/],
    [registerCheckCommand, ["check", "--json", "--grid", "huge"], "check", /Allowed choices/],
    [registerCheckCommand, ["check", "--json", "--grid", "sparse", "--dtype", "fp16"], "check", /bf16 only/],
    [registerCeilingsCommand, ["ceilings", "--json", "--iters", "1"], "ceilings", /expected an integer >= 20/],
    [registerStartCommand, ["start", "--json", "--iters", "1"], "start", /expected an integer >= 20/],
  ];
  for (const [register, args, name, message] of runs) {
    let probed = false;
    const r = await runCommand(register, args, { probeGpu: () => ((probed = true), NO_GPU.probeGpu()) });
    assert.equal(r.code, 2, args.join(" "));
    const e = errorJson(r.out, "usage", `flashmla ${name}`, 2);
    assert.match(e.message, message, args.join(" "));
    assert.ok(e.hint !== undefined, args.join(" "));
    assert.equal(r.err.split("\n").length, 2, r.err);
    assert.equal(probed, false, `${args.join(" ")}: the command line is checked first`);
  }
});

test("an unexpected failure of a GPU command is { error } with kind 'error' on stdout under --json, exit 1", async () => {
  // A "device" that is not one makes the work throw, as a CUDA error would; guarded() must catch it.
  const r = await runCommand(registerStartCommand, ["start", "--json"], { probeGpu: () => ({ ok: true as const, device: undefined as never }) });
  assert.equal(r.code, 1);
  const e = errorJson(r.out, "error", "flashmla start", 1);
  assert.ok(e.message.length > 0);
  assert.match(r.err, /^flashmla start: failed: /);
});

test("flashmla (the program) prints usage errors in one line with a hint, as JSON under --json, for info too", () => {
  const unknownOption = flashmla(["info", "--bogus"]);
  assert.equal(unknownOption.status, 2);
  assert.equal(unknownOption.stderr, "flashmla info: unknown option '--bogus' (run flashmla info --help)\n");
  assert.equal(unknownOption.stdout, "");

  const unknownCommand = flashmla(["nosuchcommand"]);
  assert.equal(unknownCommand.status, 2);
  assert.equal(unknownCommand.stderr, "flashmla: unknown command 'nosuchcommand' (run flashmla --help)\n");

  const typo = flashmla(["bench", "--cas", "dense-b1"]);
  assert.equal(typo.status, 2);
  assert.equal(typo.stderr, "flashmla bench: unknown option '--cas'; did you mean --case? (run flashmla bench --help)\n");

  const infoJson = flashmla(["info", "--json", "--device", "first"]);
  assert.equal(infoJson.status, 2);
  const e = errorJson(infoJson.stdout, "usage", "flashmla info", 2);
  assert.match(e.message, /argument 'first' is invalid/);
  assert.equal(e.hint, "run flashmla info --help");

  const benchJson = flashmla(["bench", "--json", "--case", "x"]);
  assert.equal(benchJson.status, 2);
  assert.equal(errorJson(benchJson.stdout, "usage", "flashmla bench", 2).hint, "try flashmla bench --list");
  assert.equal(benchJson.stderr, "flashmla bench: unknown case 'x' (try flashmla bench --list)\n");

  const noGpu = flashmla(["check", "--json"]);
  assert.equal(noGpu.status, 1);
  assert.match(errorJson(noGpu.stdout, "no-gpu", "flashmla check", 1).message, /^no GPU: .*libcuda\.so\.1 not found/);
});

test("--help, --version and a bare flashmla still behave", () => {
  const help = flashmla(["bench", "--help"]);
  assert.equal(help.status, 0);
  assert.match(help.stdout, /Examples:/);
  const version = flashmla(["--version"]);
  assert.equal(version.status, 0);
  assert.match(version.stdout, /^\d+\.\d+\.\d+/);
  const bare = flashmla([]);
  assert.equal(bare.status, 2);
  assert.match(bare.stderr, /Usage: flashmla/);
});

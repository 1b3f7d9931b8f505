import os from "node:os";
import path from "node:path";
import { Command } from "commander";
import { CeilingsCache } from "../../../src/bench/CeilingsCache.js";
import type { GpuCommandDeps } from "../../../src/cli/commands/bench.js";
import { registerRooflineCommand, type RooflineCommandDeps } from "../../../src/cli/commands/roofline.js";

class ExitCalled extends Error {
  constructor(readonly code: number) {
    super(`exit(${code})`);
  }
}

/** The outcome of one in-process command run. */
export interface CommandRun {
  /** Exit status: 0 when the action returned without calling exit. */
  code: number;
  out: string;
  err: string;
}

/**
 * A ceilings cache with nothing in it: tests must not pick up the measured ceilings a real run left
 * on this machine.
 */
export function emptyCeilingsCache(): CeilingsCache {
  return new CeilingsCache(path.join(os.tmpdir(), `flashmla-ts-no-such-dir-${process.pid}`, "ceilings.json"));
}

/**
 * Runs `flashmla <args>` in process with one command registered by `register`, output captured and
 * exit turned into a throw, so tests see the status, stdout and stderr of a real run.
 */
export async function runCommand(
  register: (program: Command, deps: GpuCommandDeps) => unknown,
  args: string[],
  deps: Omit<GpuCommandDeps, "exit"> = {},
  colors = false,
): Promise<CommandRun> {
  let out = "";
  let err = "";
  const program = new Command("flashmla").exitOverride().configureOutput({
    writeOut: (s) => void (out += s),
    writeErr: (s) => void (err += s),
    getOutHasColors: () => colors,
    getErrHasColors: () => colors,
  });
  register(program, {
    progress: false,
    cache: emptyCeilingsCache(),
    ...deps,
    exit: (code: number): never => {
      throw new ExitCalled(code);
    },
  });
  try {
    await program.parseAsync(args, { from: "user" });
    return { code: 0, out, err };
  } catch (e) {
    if (e instanceof ExitCalled) return { code: e.code, out, err };
    throw e;
  }
}

/**
 * Runs `flashmla roofline <args>` in process like {@link runCommand}; the ceilings cache is empty
 * unless `deps` gives one, so the measured roofs are the table's.
 */
export async function runRoofline(args: string[], deps: Omit<RooflineCommandDeps, "exit"> = {}, colors = false): Promise<CommandRun> {
  return runCommand((program, d) => registerRooflineCommand(program, { cache: emptyCeilingsCache(), ...deps, exit: d.exit }), ["roofline", ...args], {}, colors);
}

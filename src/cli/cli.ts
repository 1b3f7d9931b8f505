#!/usr/bin/env node
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { Command } from "commander";
import { Device } from "../runtime/Device.js";
import { driverAvailable } from "../driver/loadDriver.js";
import { registerBenchCommand } from "./commands/bench.js";
import { registerCeilingsCommand } from "./commands/ceilings.js";
import { registerCheckCommand } from "./commands/check.js";
import { registerDcpBenchCommand } from "./commands/dcpBench.js";
import { registerInfoCommand } from "./commands/info.js";
import { registerRooflineCommand } from "./commands/roofline.js";
import { registerStartCommand } from "./commands/start.js";
import { commandNamed, reportCommanderErrors, reportFailure, USAGE_EXIT_CODE, wantsJson } from "./cliErrors.js";
import { packageVersion } from "./options.js";
import pc from "picocolors";

export { USAGE_EXIT_CODE };

/**
 * The `flashmla` program with every command registered. Each command lives in
 * `commands/<name>.ts` and adds itself with `register<Name>Command(program)`.
 */
export function createProgram(): Command {
  const program = new Command("flashmla")
    .description("FlashMLA-class MLA decode attention for Node.js on NVIDIA Hopper GPUs, with a CPU reference")
    .version(packageVersion(), "-V, --version");
  // A bad command line is one line with a hint and status 2 (commander: its message, status 1).
  // Set before the commands are registered: a command that sets no handler of its own (info)
  // inherits this one.
  reportCommanderErrors(program, (code: number): never => process.exit(code));

  registerInfoCommand(program);
  registerRooflineCommand(program, { detectGpuName });
  registerCeilingsCommand(program);
  registerBenchCommand(program);
  registerDcpBenchCommand(program);
  registerCheckCommand(program);
  registerStartCommand(program);
  return program;
}

function detectGpuName(): string | undefined {
  return driverAvailable().ok ? Device.get().name : undefined;
}


async function main(): Promise<void> {
  const program = createProgram();
  try {
    await program.parseAsync(process.argv);
  } catch (e) {
    // What no command caught: reported like any failure, as JSON too when --json was asked for.
    const io = { out: (s: string) => void process.stdout.write(s), err: (s: string) => void process.stderr.write(s), errColors: pc.createColors(false) };
    process.exitCode = reportFailure(io, commandNamed(program), { kind: "error", message: e instanceof Error ? e.message : String(e) }, wantsJson(program));
  }
}

function isEntryPoint(): boolean {
  try {
    return process.argv[1] !== undefined && pathToFileURL(realpathSync(process.argv[1])).href === import.meta.url;
  } catch {
    return false;
  }
}

if (isEntryPoint()) await main();

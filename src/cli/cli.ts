#!/usr/bin/env node
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { Command } from "commander";
import { Device } from "../runtime/Device.js";
import { driverAvailable } from "../driver/loadDriver.js";
import { registerBenchCommand } from "./commands/bench.js";
import { registerCeilingsCommand } from "./commands/ceilings.js";
import { registerCheckCommand } from "./commands/check.js";
import { registerInfoCommand } from "./commands/info.js";
import { registerRooflineCommand } from "./commands/roofline.js";
import { registerStartCommand } from "./commands/start.js";
import { packageVersion } from "./options.js";

/** Exit status for a command line that cannot be run as given (unknown command or option, bad value). */
export const USAGE_EXIT_CODE = 2;

/**
 * The `flashmla` program with every command registered. Each command lives in
 * `commands/<name>.ts` and adds itself with `register<Name>Command(program)`.
 */
export function createProgram(): Command {
  const program = new Command("flashmla")
    .description("FlashMLA-class MLA decode attention for Node.js on NVIDIA Hopper GPUs, with a CPU reference")
    .version(packageVersion(), "-V, --version")
    .showHelpAfterError()
    // Commander ends every error with status 1; here a bad command line is status 2. Subcommands
    // registered below inherit this.
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : USAGE_EXIT_CODE));

  registerInfoCommand(program);
  registerRooflineCommand(program, { detectGpuName });
  registerCeilingsCommand(program);
  registerBenchCommand(program);
  registerCheckCommand(program);
  registerStartCommand(program);
  return program;
}

function detectGpuName(): string | undefined {
  return driverAvailable().ok ? Device.get().name : undefined;
}


async function main(): Promise<void> {
  try {
    await createProgram().parseAsync(process.argv);
  } catch (e) {
    process.stderr.write(`flashmla: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
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

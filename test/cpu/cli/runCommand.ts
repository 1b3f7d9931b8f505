import { Command } from "commander";
import type { GpuCommandDeps } from "../../../src/cli/commands/bench.js";

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

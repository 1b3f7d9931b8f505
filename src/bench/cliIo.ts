import type { Command } from "commander";
import pc from "picocolors";

type Colors = ReturnType<typeof pc.createColors>;

/** Where a command writes, through commander's output configuration (so tests can capture it). */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  /** Colours for stdout: real ones only on a colour TTY (commander's rule, NO_COLOR/FORCE_COLOR honoured). */
  colors: Colors;
  /** Colours for stderr, by the same rule. */
  errColors: Colors;
}

/** The output functions of `cmd`, as configured on it or inherited from its program. */
export function cliIo(cmd: Command): CliIo {
  const o = cmd.configureOutput();
  return {
    out: (s) => (o.writeOut ?? ((t: string) => process.stdout.write(t)))(s),
    err: (s) => (o.writeErr ?? ((t: string) => process.stderr.write(t)))(s),
    colors: pc.createColors(o.getOutHasColors?.() ?? false),
    errColors: pc.createColors(o.getErrHasColors?.() ?? false),
  };
}

import type { Command, CommanderError } from "commander";
import pc from "picocolors";
import type { CliIo } from "../bench/cliIo.js";

/** Exit status when a check failed, or the command could not do its job (no GPU, an error). */
export const FAILURE_EXIT_CODE = 1;

/** Exit status for a command line that cannot be run as given (unknown command or option, bad value). */
export const USAGE_EXIT_CODE = 2;

/**
 * Why a command stopped: `usage` a bad command line (exit 2), `no-gpu` a GPU command run where no
 * usable Hopper GPU is (exit 1), `error` anything that went wrong while working (exit 1).
 */
export type CliFailureKind = "usage" | "no-gpu" | "error";

/** A failure as a command reports it. */
export interface CliFailure {
  kind: CliFailureKind;
  /** One line, without the "flashmla <command>: " prefix. */
  message: string;
  /** What to try next, e.g. "try flashmla bench --list"; usage errors default to the command's --help. */
  hint?: string;
  /** Further lines for a human (stderr only). */
  detail?: string;
}

/**
 * What a `--json` run that fails prints on stdout, so a script reads the outcome from the same
 * stream as a success: `{ "error": { "kind", "message", "command", "hint"?, "exitCode" } }`.
 */
export interface CliErrorJson {
  error: { kind: CliFailureKind; message: string; command: string; hint?: string; exitCode: number };
}

/** The exit status of a failure of `kind`. */
export function exitCodeOf(kind: CliFailureKind): number {
  return kind === "usage" ? USAGE_EXIT_CODE : FAILURE_EXIT_CODE;
}

/**
 * Reports `f` for `command` ("bench", or "" for the program itself): one line on stderr (usage
 * errors end in a hint instead of the whole help), the detail lines after it and, when `json`,
 * {@link CliErrorJson} on stdout. Returns the exit status.
 */
export function reportFailure(io: Pick<CliIo, "out" | "err" | "errColors">, command: string, f: CliFailure, json: boolean): number {
  const exitCode = exitCodeOf(f.kind);
  const name = command === "" ? "flashmla" : `flashmla ${command}`;
  const hint = f.hint ?? (f.kind === "usage" ? `run ${name} --help` : undefined);
  const c = io.errColors;
  const head = f.kind === "usage" ? `${name}:` : c.red(f.kind === "no-gpu" ? `${name}: no GPU` : `${name}: failed`);
  // The kind already says "no GPU" / "failed"; the message follows it.
  const sep = f.kind === "usage" ? " " : ": ";
  io.err(`${head}${sep}${f.message}${hint !== undefined ? ` (${hint})` : ""}\n${f.detail !== undefined ? `${f.detail}\n` : ""}`);
  if (json) {
    const body: CliErrorJson = {
      error: {
        kind: f.kind,
        message: f.kind === "no-gpu" ? `no GPU: ${f.message}` : f.message,
        command: name,
        ...(hint !== undefined ? { hint } : {}),
        exitCode,
      },
    };
    io.out(`${JSON.stringify(body, null, 2)}\n`);
  }
  return exitCode;
}

/**
 * Whether the command line asked for JSON: `--json` (or `--json=FILE`) before any `--`. Read from
 * the raw arguments because a bad command line fails before commander has parsed the options.
 */
export function wantsJson(cmd: Command): boolean {
  let root = cmd;
  while (root.parent !== null) root = root.parent;
  // rawArgs is set by parse()/parseAsync() and absent from commander's typings.
  const raw = (root as unknown as { rawArgs?: readonly string[] }).rawArgs ?? [];
  for (const a of raw) {
    if (a === "--") return false;
    if (a === "--json" || a.startsWith("--json=")) return true;
  }
  return false;
}

/**
 * A commander error's message as one line without commander's "error: " prefix; its "(Did you
 * mean …?)" suggestion, which commander puts on a line of its own, joins the line.
 */
export function commanderMessage(message: string): string {
  return message
    .replace(/^error: /, "")
    .replace(/\s*\n\s*\(Did you mean (.*)\)\s*$/s, "; did you mean $1")
    .replace(/\s*\n\s*/g, " ")
    .trim()
    // The hint follows in parentheses; a full stop before it would end the sentence early.
    .replace(/\.$/, "");
}

/**
 * Makes `cmd` report its command-line errors in one line with a hint (and as JSON when `--json` was
 * given) instead of commander's message and help, and end with `exit`: 0 after --help or --version,
 * 2 for a bad command line. `name` is the command in the messages ("bench"); for the program itself
 * it is found from the command line, since errors of subcommands that inherit the handler (info)
 * arrive there too.
 */
export function reportCommanderErrors(cmd: Command, exit: (code: number) => never, name?: string): Command {
  cmd.configureOutput({ outputError: () => {} });
  return cmd.exitOverride((err: CommanderError) => {
    if (err.exitCode === 0) return exit(0);
    // No subcommand given: commander has printed the help (on stderr) as the answer.
    if (err.code === "commander.help") return exit(USAGE_EXIT_CODE);
    const command = name ?? commandNamed(cmd);
    const o = cmd.configureOutput();
    const io = {
      out: (s: string) => (o.writeOut ?? ((t: string) => process.stdout.write(t)))(s),
      err: (s: string) => (o.writeErr ?? ((t: string) => process.stderr.write(t)))(s),
      errColors: plainColors,
    };
    return exit(reportFailure(io, command, { kind: "usage", message: commanderMessage(err.message) }, wantsJson(cmd)));
  });
}

/** The subcommand a command line names (the first argument that is one), or "" for none. */
export function commandNamed(cmd: Command): string {
  let root = cmd;
  while (root.parent !== null) root = root.parent;
  const names = new Set(root.commands.flatMap((c) => [c.name(), ...c.aliases()]));
  const raw = (root as unknown as { rawArgs?: readonly string[] }).rawArgs ?? [];
  for (const a of raw) {
    if (a === "--") break;
    if (names.has(a)) return root.commands.find((c) => c.name() === a || c.aliases().includes(a))!.name();
  }
  return "";
}

/** Usage lines carry no colour. */
const plainColors = pc.createColors(false);

/**
 * The closest of `names` to `name` by edit distance, if it is close enough to be a likely typo
 * (at most a third of the name's length, and at most 3 edits).
 */
export function closestName(name: string, names: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Math.min(3, Math.floor(name.length / 3)) + 1;
  for (const n of names) {
    const d = editDistance(name, n);
    if (d < bestD) (best = n), (bestD = d);
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length];
}

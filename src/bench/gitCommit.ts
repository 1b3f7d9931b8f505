import { execFileSync } from "node:child_process";
import { config } from "../config.js";

/** The commit a result was produced at, for the JSON record. */
export interface CommitInfo {
  /** `git rev-parse HEAD`, or "unknown" outside a git checkout (an installed package). */
  commit: string;
  /** Whether tracked files differ from the commit; undefined when unknown. */
  dirty?: boolean;
}

/**
 * The commit of `cwd` (default: the package root) from git; FLASHMLA_COMMIT overrides it, for copies
 * of a checkout without its .git (a GPU host that receives the work tree only). Never throws.
 */
export function gitCommit(cwd: string = config.packageRoot, env: NodeJS.ProcessEnv = process.env): CommitInfo {
  const given = env.FLASHMLA_COMMIT?.trim();
  if (given !== undefined && given !== "") return { commit: given };
  const git = (args: string[]) => execFileSync("git", args, { cwd, encoding: "utf8", timeout: 5000, stdio: ["ignore", "pipe", "ignore"] }).trim();
  let commit: string;
  try {
    commit = git(["rev-parse", "HEAD"]);
  } catch {
    return { commit: "unknown" };
  }
  if (!/^[0-9a-f]{40}$/.test(commit)) return { commit: "unknown" };
  try {
    return { commit, dirty: git(["status", "--porcelain", "--untracked-files=no"]) !== "" };
  } catch {
    return { commit };
  }
}

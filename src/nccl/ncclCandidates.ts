import { config } from "../config.js";
import { execFileSync } from "node:child_process";
import { statSync } from "node:fs";
import path from "node:path";
import { messageOf } from "../driver/loadKoffi.js";

/** Where a libnccl.so.2 came from. */
export type NcclSource = "FLASHMLA_NCCL" | "system" | "python";

/** A file (or, for the system loader, a soname) to try, and how messages name the place it came from. */
export interface NcclCandidate {
  source: NcclSource;
  /** What koffi.load is given: a path, or a bare soname the system loader resolves. */
  path: string;
  /** The place, e.g. "FLASHMLA_NCCL=/opt/nccl", "the system loader", "python3". */
  where: string;
}

/** One step of the search: a candidate to load, or a place that had none (and why). */
export type NcclSearchStep = { candidate: NcclCandidate } | { where: string; reason: string };

/** What one Python interpreter said about its nvidia/nccl/lib folders. */
export type PythonNcclAnswer = { ok: true; dirs: string[] } | { ok: false; reason: string };

/** Where to look for NCCL; every field has a default, tests replace them. */
export interface NcclSearch {
  /** FLASHMLA_NCCL: libnccl.so.2's path, or a folder holding it. @default config.ncclPath */
  override?: string;
  /** The library's file name, also what the system loader is asked for. @default "libnccl.so.2" */
  soname?: string;
  /** Python interpreters asked for the nvidia-nccl-cu12/13 wheel, in order. @default ["python3", "python"] */
  pythons?: readonly string[];
  /** Asks one interpreter for its nvidia/nccl/lib folders. @default askPythonForNccl */
  askPython?: (python: string) => PythonNcclAnswer;
}

/** How long one Python interpreter may take to answer; a cold start with the wheel imported is ~0.1 s. */
export const PYTHON_TIMEOUT_MS = 5000;

/**
 * The places libnccl.so.2 may be, in the order they are tried: FLASHMLA_NCCL (a file, or a folder
 * holding libnccl.so.2), the system loader (ld.so.cache, LD_LIBRARY_PATH), then the nvidia/nccl/lib
 * folder of each Python interpreter's environment, where pip's nvidia-nccl-cu12/13 wheel (what PyTorch
 * installs) puts it. Lazy: Python is only started when the steps before it have all been tried, so a
 * machine with NCCL on the system loader never pays for it.
 */
export function* ncclCandidates(search: NcclSearch = {}): Generator<NcclSearchStep> {
  const soname = search.soname ?? "libnccl.so.2";
  const override = "override" in search ? search.override : config.ncclPath;
  if (override !== undefined && override !== "") {
    yield { candidate: { source: "FLASHMLA_NCCL", path: isDirectory(override) ? path.join(override, soname) : override, where: `FLASHMLA_NCCL=${override}` } };
  }
  yield { candidate: { source: "system", path: soname, where: "the system loader" } };
  const ask = search.askPython ?? askPythonForNccl;
  const seen = new Set<string>();
  for (const python of search.pythons ?? ["python3", "python"]) {
    const answer = ask(python);
    if (!answer.ok) {
      yield { where: python, reason: answer.reason };
      continue;
    }
    const fresh = answer.dirs.filter((dir) => !seen.has(dir));
    if (answer.dirs.length === 0) yield { where: python, reason: "no nvidia/nccl/lib in its environment" };
    for (const dir of fresh) {
      seen.add(dir);
      yield { candidate: { source: "python", path: path.join(dir, soname), where: python } };
    }
  }
}

/**
 * Prints the nvidia/nccl/lib folders that exist: the nvidia.nccl package's, then any under sys.path
 * (a wheel whose package does not import, e.g. for want of its own dependencies).
 */
const PYTHON_SCRIPT = `
import os, sys
dirs = []
try:
    import nvidia.nccl as m
    dirs += [os.path.join(p, "lib") for p in m.__path__]
except Exception:
    pass
dirs += [os.path.join(p, "nvidia", "nccl", "lib") for p in sys.path if p]
print("\\n".join(d for d in dict.fromkeys(dirs) if os.path.isdir(d)))
`;

/** Runs `python` (within {@link PYTHON_TIMEOUT_MS}) and returns the nvidia/nccl/lib folders of its environment. Never throws. */
export function askPythonForNccl(python: string): PythonNcclAnswer {
  try {
    const out = execFileSync(python, ["-c", PYTHON_SCRIPT], { encoding: "utf8", timeout: PYTHON_TIMEOUT_MS, stdio: ["ignore", "pipe", "ignore"] });
    return { ok: true, dirs: out.split("\n").map((line) => line.trim()).filter((line) => line !== "") };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return { ok: false, reason: "not installed" };
    if (code === "ETIMEDOUT") return { ok: false, reason: `no answer within ${PYTHON_TIMEOUT_MS / 1000} s` };
    return { ok: false, reason: `failed (${messageOf(e).split("\n")[0]})` };
  }
}

function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

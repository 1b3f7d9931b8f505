import { loadKoffi, loadLibrary, messageOf, type Koffi } from "../driver/loadKoffi.js";
import { NcclUnavailableError } from "../errors/NcclUnavailableError.js";
import { ncclBindings, optionalNcclSymbols, registerNcclTypes, type NcclApi } from "./ncclBindings.js";
import { ncclCandidates, type NcclSearch, type NcclSource } from "./ncclCandidates.js";
import { NcclResult } from "./ncclEnums.js";
import { decodeNcclVersion, type NcclVersion } from "./decodeNcclVersion.js";

/** The loaded NCCL: its functions, the file they came from, and its version. */
export interface NcclLibrary {
  readonly api: NcclApi;
  /** What was loaded: a path, or "libnccl.so.2" when the system loader found it. */
  readonly path: string;
  readonly source: NcclSource;
  readonly version: NcclVersion;
}

/** Opens one shared library; a stand-in in tests. `missing`: the file is not there (vs. there but not loadable). */
export type NcclOpener = (libPath: string) => { ok: true; lib: ReturnType<Koffi["load"]> } | { ok: false; missing: boolean; error: unknown };

type LoadState = { ok: true; library: NcclLibrary } | { ok: false; error: NcclUnavailableError };

let state: LoadState | undefined;

/**
 * NCCL, loaded on first use from the first place of {@link ncclCandidates} that holds a usable
 * libnccl.so.2 (FLASHMLA_NCCL, the system loader, then Python's nvidia/nccl/lib), with every function
 * of `ncclBindings` bound. The outcome, success or failure, is kept for the life of the process.
 *
 * Before the first load it sets `NCCL_NVLS_ENABLE=0` in the environment unless the user set it (any
 * value, "1" included, is left alone): NVLink SHARP (multicast) is kept off by default, as on the
 * machines this was tested on, where it needs a fabric-manager setup they do not have; NCCL reads the
 * variable when it creates a communicator. A child process inherits it. A worker thread's
 * `process.env` is its own copy, which native code does not see: set the variable in the main
 * thread, or in the shell, before a worker first loads NCCL.
 *
 * @throws NcclUnavailableError listing every place tried and how to install NCCL.
 */
export function loadNccl(): NcclLibrary {
  if (state === undefined) {
    process.env.NCCL_NVLS_ENABLE ??= "0";
    state = openNccl();
  }
  if (!state.ok) throw state.error;
  return state.library;
}

/** Whether NCCL loads, and from where, without throwing (the outcome is loadNccl's, kept). */
export function ncclAvailable(): { ok: true; path: string; source: NcclSource; version: NcclVersion } | { ok: false; reason: string } {
  try {
    const { path, source, version } = loadNccl();
    return { ok: true, path, source, version };
  } catch (e) {
    return { ok: false, reason: messageOf(e) };
  }
}

/**
 * Tries each candidate of `search` in order and binds the first that loads and exports NCCL's
 * functions; not memoised. `open` loads one library (koffi.load by default).
 * @internal loadNccl() is the entry point; tests call this with their own search and opener.
 */
export function openNccl(search: NcclSearch = {}, open?: NcclOpener): LoadState {
  let koffi: Koffi;
  try {
    koffi = loadKoffi();
  } catch (e) {
    return { ok: false, error: new NcclUnavailableError([`the FFI library koffi (it could not be loaded on this platform: ${messageOf(e)})`], { cause: e }) };
  }
  registerNcclTypes(koffi);
  const opener = open ?? ((libPath: string) => loadLibrary(koffi, libPath));
  const tried: string[] = [];
  let lastError: unknown;
  for (const step of ncclCandidates(search)) {
    if (!("candidate" in step)) {
      tried.push(`${step.where} (${step.reason})`);
      continue;
    }
    const { candidate } = step;
    const opened = opener(candidate.path);
    if (!opened.ok) {
      lastError = opened.error;
      const why = opened.missing ? "not found" : `could not be loaded: ${messageOf(opened.error)}`;
      tried.push(`${candidate.where} (${candidate.path}: ${why})`);
      continue;
    }
    const bound = bindNccl(opened.lib);
    if (!bound.ok) {
      tried.push(`${candidate.where} (${candidate.path}: ${bound.reason})`);
      continue;
    }
    return { ok: true, library: Object.freeze({ api: bound.api, path: candidate.path, source: candidate.source, version: bound.version }) };
  }
  return { ok: false, error: new NcclUnavailableError(tried, { cause: lastError }) };
}

/** Binds every function of `ncclBindings` and reads the version; a library that lacks one is not NCCL (or too old). */
function bindNccl(lib: ReturnType<Koffi["load"]>): { ok: true; api: NcclApi; version: NcclVersion } | { ok: false; reason: string } {
  const api: Record<string, unknown> = {};
  for (const [symbol, [ret, args]] of Object.entries(ncclBindings)) {
    try {
      api[symbol] = lib.func(symbol, ret, [...args]);
    } catch {
      if (optionalNcclSymbols.has(symbol)) continue;
      return { ok: false, reason: `has no ${symbol}: not NCCL, or an NCCL older than 2.7` };
    }
  }
  const nccl = api as unknown as NcclApi;
  const code = new Int32Array(1);
  const rc = nccl.ncclGetVersion(code);
  if (rc !== NcclResult.Success) return { ok: false, reason: `ncclGetVersion returned ${rc}` };
  return { ok: true, api: nccl, version: decodeNcclVersion(code[0]) };
}

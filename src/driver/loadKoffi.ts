import { createRequire } from "node:module";
import type koffiModule from "koffi";

/** The koffi module's type (its default export). */
export type Koffi = typeof koffiModule;

let cached: { ok: true; koffi: Koffi } | { ok: false; error: Error } | undefined;

/**
 * Loads koffi on first use. It is required lazily, not imported, because its native part comes
 * from a per-platform optional package: on a platform without one, importing this library must
 * still work for the CPU reference, and only GPU use reports the problem.
 */
export function loadKoffi(): Koffi {
  if (!cached) {
    try {
      const require = createRequire(import.meta.url);
      cached = { ok: true, koffi: require("koffi") as Koffi };
    } catch (e) {
      cached = { ok: false, error: e instanceof Error ? e : new Error(String(e)) };
    }
  }
  if (!cached.ok) throw cached.error;
  return cached.koffi;
}

/** An error's message, or the thrown value as a string. */
export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Opens a shared library with koffi. On failure, `missing` says whether the loader could not find
 * the file (as opposed to finding one it could not load), so callers can say which.
 */
export function loadLibrary(koffi: Koffi, libPath: string): { ok: true; lib: ReturnType<Koffi["load"]> } | { ok: false; missing: boolean; error: unknown } {
  try {
    return { ok: true, lib: koffi.load(libPath) };
  } catch (e) {
    return { ok: false, missing: /no such file|cannot open shared object|not found/i.test(messageOf(e)), error: e };
  }
}

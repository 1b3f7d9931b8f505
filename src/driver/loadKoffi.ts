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

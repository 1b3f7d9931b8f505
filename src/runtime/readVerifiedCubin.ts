import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

const REMEDY = "run npm run build:kernels";

/** One compiled kernel module as listed in `manifest.json`. */
export interface KernelManifestEntry {
  /** Module name; the cubin is `<name>.cubin` beside the manifest. */
  name: string;
  /** Lower-case hex sha256 of the cubin file. */
  cubinSha256: string;
  /** Everything else the kernel build recorded (nvcc version, registers, smem, spills, ...). */
  [field: string]: unknown;
}

/**
 * Reads `<kernelDir>/manifest.json`. Two shapes are accepted: `{ "kernels": { "<name>": {
 * "cubinSha256": "..." , ...} } }` and `{ "kernels": [ { "name": "<name>", "cubinSha256": "..." } ] }`.
 * @throws Error naming the file and the remedy when it is missing or malformed.
 */
export function readKernelManifest(kernelDir: string): KernelManifestEntry[] {
  const file = path.join(kernelDir, "manifest.json");
  if (!existsSync(file)) throw new Error(`${file} not found: the CUDA kernels are not built; ${REMEDY}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new Error(`${file} is not valid JSON (${e instanceof Error ? e.message : String(e)}); ${REMEDY}`);
  }
  const kernels = (parsed as { kernels?: unknown } | null)?.kernels;
  const raw: unknown[] = Array.isArray(kernels)
    ? kernels
    : kernels !== null && typeof kernels === "object"
      ? Object.entries(kernels).map(([name, entry]) => ({ name, ...(entry as object) }))
      : [];
  if (raw.length === 0 && !Array.isArray(kernels)) {
    throw new Error(`${file} has no "kernels" object or array; ${REMEDY}`);
  }
  return raw.map((entry, i) => {
    const e = entry as Partial<KernelManifestEntry> | null;
    if (!e || typeof e.name !== "string" || typeof e.cubinSha256 !== "string" || !/^[0-9a-f]{64}$/i.test(e.cubinSha256)) {
      throw new Error(`${file}: kernels entry ${i} lacks a "name" or a 64-hex-digit "cubinSha256"; ${REMEDY}`);
    }
    return { ...e, name: e.name, cubinSha256: e.cubinSha256.toLowerCase() };
  });
}

/** Lower-case hex sha256 of `bytes`. */
export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/**
 * Reads `<kernelDir>/<name>.cubin` after checking that the manifest lists it and that the file's
 * sha256 matches, so a stale or half-written cubin is never handed to the driver.
 * @throws Error naming the file and the remedy ("run npm run build:kernels").
 */
export function readVerifiedCubin(kernelDir: string, name: string): Buffer {
  const entries = readKernelManifest(kernelDir);
  const entry = entries.find((e) => e.name === name);
  if (!entry) {
    const known = entries.map((e) => e.name).join(", ") || "none";
    throw new Error(`${path.join(kernelDir, "manifest.json")} lists no kernel module "${name}" (it has: ${known}); ${REMEDY}`);
  }
  const file = path.join(kernelDir, `${name}.cubin`);
  if (!existsSync(file)) throw new Error(`${file} not found although manifest.json lists it; ${REMEDY}`);
  const bytes = readFileSync(file);
  const actual = sha256Hex(bytes);
  if (actual !== entry.cubinSha256) {
    throw new Error(
      `${file} does not match manifest.json (sha256 ${actual.slice(0, 12)}…, expected ${entry.cubinSha256.slice(0, 12)}…): the cubin is stale or damaged; ${REMEDY}`,
    );
  }
  return bytes;
}

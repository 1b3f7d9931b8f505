import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { KERNEL_REGISTRY } from "../../src/mla/contract/kernelRegistry.js";

/** Every cubin the kernel registry names, once each. */
export const REGISTRY_CUBINS: readonly string[] = [...new Set(Object.values(KERNEL_REGISTRY).map((row) => row.cubin))];

/**
 * Writes a kernel folder whose manifest.json lists `names`, each cubin a few bytes that match their
 * sha256 (except `damaged`, whose bytes differ): enough for the checks that hash cubins, not for a driver.
 */
export function writeFakeKernelDir(dir: string, names: readonly string[], damaged?: string): string {
  mkdirSync(dir, { recursive: true });
  const kernels: Record<string, { cubinSha256: string }> = {};
  for (const name of names) {
    const bytes = Buffer.from(`cubin ${name}`);
    writeFileSync(path.join(dir, `${name}.cubin`), name === damaged ? Buffer.from("damaged") : bytes);
    kernels[name] = { cubinSha256: createHash("sha256").update(bytes).digest("hex") };
  }
  writeFileSync(path.join(dir, "manifest.json"), JSON.stringify({ kernels }));
  return dir;
}

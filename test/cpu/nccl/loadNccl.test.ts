import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { NCCL_INSTALL_HINT, NcclUnavailableError } from "../../../src/errors/NcclUnavailableError.js";
import { ncclBindings } from "../../../src/nccl/ncclBindings.js";
import { openNccl, type NcclOpener } from "../../../src/nccl/loadNccl.js";

const MISSING_SONAME = "libnccl-flashmla-test-missing.so.2";

/** The error openNccl() gives for a search, which must fail. */
function failure(...args: Parameters<typeof openNccl>): NcclUnavailableError {
  const r = openNccl(...args);
  assert.equal(r.ok, false, "expected no NCCL");
  if (r.ok) throw new Error("unreachable");
  assert.ok(r.error instanceof NcclUnavailableError);
  return r.error;
}

test("openNccl() tries every place in order and, finding none, lists them with how to install NCCL", () => {
  const opened: string[] = [];
  const missing: NcclOpener = (libPath) => (opened.push(libPath), { ok: false, missing: true, error: new Error(`${libPath}: cannot open shared object file`) });
  const e = failure(
    {
      override: "/opt/nccl/libnccl.so.2",
      askPython: (p) => (p === "python3" ? { ok: true, dirs: ["/venv/nvidia/nccl/lib"] } : { ok: false, reason: "not installed" }),
    },
    missing,
  );
  assert.deepEqual(opened, ["/opt/nccl/libnccl.so.2", "libnccl.so.2", "/venv/nvidia/nccl/lib/libnccl.so.2"]);
  assert.deepEqual(e.tried, [
    "FLASHMLA_NCCL=/opt/nccl/libnccl.so.2 (/opt/nccl/libnccl.so.2: not found)",
    "the system loader (libnccl.so.2: not found)",
    "python3 (/venv/nvidia/nccl/lib/libnccl.so.2: not found)",
    "python (not installed)",
  ]);
  assert.equal(e.message, `NCCL could not be loaded; tried: ${e.tried.join("; ")}. ${NCCL_INSTALL_HINT}`);
  for (const remedy of ["pip install nvidia-nccl-cu13", "nvidia-nccl-cu12", "NVIDIA's libnccl2 package", "Debian's libnccl2", "set FLASHMLA_NCCL"]) {
    assert.ok(e.message.includes(remedy), remedy);
  }
});

test("openNccl() without NCCL anywhere, through koffi: an NcclUnavailableError, never koffi's own error", () => {
  const missing = "/nonexistent/flashmla-test/libnccl.so.2";
  const e = failure({ override: missing, soname: MISSING_SONAME, pythons: ["/nonexistent/flashmla-test/python3"] });
  assert.deepEqual(e.tried, [
    `FLASHMLA_NCCL=${missing} (${missing}: not found)`,
    `the system loader (${MISSING_SONAME}: not found)`,
    "/nonexistent/flashmla-test/python3 (not installed)",
  ]);
  assert.equal(e.name, "NcclUnavailableError");
});

test("openNccl() says which file is not a shared library, and goes on to the next place", () => {
  const bad = path.join(mkdtempSync(path.join(os.tmpdir(), "flashmla-nccl-")), "libnccl.so.2");
  writeFileSync(bad, "not an ELF file\n");
  const e = failure({ override: path.dirname(bad), soname: "libnccl.so.2", pythons: [] }, (p) =>
    p === bad ? { ok: false, missing: false, error: new Error("invalid ELF header") } : { ok: false, missing: true, error: new Error("not found") },
  );
  assert.deepEqual(e.tried, [`FLASHMLA_NCCL=${path.dirname(bad)} (${bad}: could not be loaded: invalid ELF header)`, "the system loader (libnccl.so.2: not found)"]);
});

test("openNccl() passes over a library without NCCL's functions", { skip: process.platform !== "linux" && "needs glibc's libc.so.6" }, () => {
  const e = failure({ override: "libc.so.6", soname: MISSING_SONAME, pythons: [] });
  assert.equal(e.tried[0], "FLASHMLA_NCCL=libc.so.6 (libc.so.6: has no ncclGetVersion: not NCCL, or an NCCL older than 2.7)");
  assert.equal(e.tried.length, 2);
});

/**
 * A stand-in libnccl.so.2 exporting every symbol the loader binds: ncclGetVersion answers 2.28.9,
 * fake_getenv reads the process environment as NCCL's native code sees it, the rest return
 * ncclInternalError. Undefined when there is no C compiler.
 */
function buildStandIn(withoutSymbol?: string): string | undefined {
  const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-stand-in-nccl-"));
  const stubs = Object.keys(ncclBindings)
    .filter((s) => s !== "ncclGetVersion" && s !== "ncclGetErrorString" && s !== withoutSymbol)
    .map((s) => `int ${s}() { return 3; }`);
  const source = [
    "#include <stdlib.h>",
    "int ncclGetVersion(int *v) { *v = 22809; return 0; }",
    'const char *ncclGetErrorString(int code) { (void)code; return "internal error"; }',
    "const char *fake_getenv(const char *name) { const char *v = getenv(name); return v ? v : \"(unset)\"; }",
    ...stubs,
  ].join("\n");
  writeFileSync(path.join(dir, "nccl.c"), source);
  const lib = path.join(dir, "libnccl.so.2");
  try {
    execFileSync(process.env.CC ?? "cc", ["-shared", "-fPIC", "-w", "-o", lib, path.join(dir, "nccl.c")], { stdio: "ignore" });
    return lib;
  } catch {
    return undefined;
  }
}

const standIn = process.platform === "linux" ? buildStandIn() : undefined;
const noCompiler = standIn === undefined && "needs Linux and a C compiler (cc)";

test("openNccl() loads the first place that holds NCCL and reads its version", { skip: noCompiler }, () => {
  const r = openNccl({ override: path.dirname(standIn!), soname: "libnccl.so.2", pythons: [] });
  assert.ok(r.ok, r.ok ? "" : r.error.message);
  assert.equal(r.library.path, standIn);
  assert.equal(r.library.source, "FLASHMLA_NCCL");
  assert.deepEqual(r.library.version, { code: 22809, major: 2, minor: 28, patch: 9 });
});

test("openNccl() refuses an NCCL without send/recv (older than 2.7) and names the missing function", { skip: noCompiler }, () => {
  const old = buildStandIn("ncclSend")!;
  const e = failure({ override: old, soname: MISSING_SONAME, pythons: [] });
  assert.equal(e.tried[0], `FLASHMLA_NCCL=${old} (${old}: has no ncclSend: not NCCL, or an NCCL older than 2.7)`);
});

// dist/test/cpu/nccl -> dist/src
const srcDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../src");
const mod = (p: string) => JSON.stringify(pathToFileURL(path.join(srcDir, p)).href);

/** Loads NCCL in a fresh process (the loader keeps its outcome) with `env` added, and reports what it saw. */
function loadInChild(env: Record<string, string | undefined>): {
  available: { ok: boolean; source?: string; path?: string; reason?: string };
  nvlsInJs?: string;
  nvlsInNative?: string;
  sameErrorTwice: boolean;
} {
  const script = `
    const { loadNccl, ncclAvailable } = await import(${mod("nccl/loadNccl.js")});
    const { loadKoffi } = await import(${mod("driver/loadKoffi.js")});
    const available = ncclAvailable();
    const errorOf = () => { try { loadNccl(); } catch (e) { return e; } };
    const out = { available, nvlsInJs: process.env.NCCL_NVLS_ENABLE, sameErrorTwice: errorOf() === errorOf() };
    if (available.ok) out.nvlsInNative = loadKoffi().load(available.path).func("const char *fake_getenv(const char *)")("NCCL_NVLS_ENABLE");
    process.stdout.write(JSON.stringify(out));
  `;
  const childEnv = { ...process.env, ...env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete childEnv[k];
  return JSON.parse(execFileSync(process.execPath, ["--input-type=module", "-e", script], { env: childEnv, encoding: "utf8" }));
}

test("loadNccl() takes FLASHMLA_NCCL from the environment and turns NVLink multicast off, as native code sees it", { skip: noCompiler }, () => {
  const r = loadInChild({ FLASHMLA_NCCL: standIn, NCCL_NVLS_ENABLE: undefined });
  assert.deepEqual(r.available, { ok: true, path: standIn, source: "FLASHMLA_NCCL", version: { code: 22809, major: 2, minor: 28, patch: 9 } });
  assert.equal(r.nvlsInJs, "0");
  assert.equal(r.nvlsInNative, "0");
});

test("loadNccl() leaves an NCCL_NVLS_ENABLE the user set alone", { skip: noCompiler }, () => {
  const r = loadInChild({ FLASHMLA_NCCL: standIn, NCCL_NVLS_ENABLE: "1" });
  assert.equal(r.nvlsInJs, "1");
  assert.equal(r.nvlsInNative, "1");
});

test("loadNccl() with FLASHMLA_NCCL at a missing file and no NCCL elsewhere: ncclAvailable() says why, the same error every time", () => {
  const missing = "/nonexistent/flashmla-test/env/libnccl.so.2";
  const r = loadInChild({ FLASHMLA_NCCL: missing });
  if (r.available.ok) {
    // This machine has NCCL on the system loader or in Python: the missing file was passed over.
    assert.notEqual(r.available.source, "FLASHMLA_NCCL");
    return;
  }
  assert.ok(r.available.reason!.startsWith(`NCCL could not be loaded; tried: FLASHMLA_NCCL=${missing} (${missing}: not found); the system loader (libnccl.so.2: not found); `));
  assert.ok(r.available.reason!.endsWith(NCCL_INSTALL_HINT));
  assert.ok(r.sameErrorTwice, "the failure is kept");
});

import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { askPythonForNccl, ncclCandidates, type NcclSearch, type NcclSearchStep, type PythonNcclAnswer } from "../../../src/nccl/ncclCandidates.js";

/** The steps of a search as one line each: "source path" for candidates, "where: reason" for places without one. */
function steps(search: NcclSearch): string[] {
  return [...ncclCandidates(search)].map(show);
}

function show(step: NcclSearchStep): string {
  return "candidate" in step ? `${step.candidate.source} ${step.candidate.path} [${step.candidate.where}]` : `${step.where}: ${step.reason}`;
}

const noPython = { pythons: [] as string[] };

test("ncclCandidates() tries FLASHMLA_NCCL, then the system loader, then each Python's nvidia/nccl/lib, in that order", () => {
  const answers: Record<string, PythonNcclAnswer> = {
    python3: { ok: true, dirs: ["/venv/site-packages/nvidia/nccl/lib"] },
    python: { ok: true, dirs: ["/usr/lib/python3/dist-packages/nvidia/nccl/lib"] },
  };
  assert.deepEqual(steps({ override: "/opt/nccl/lib/libnccl.so.2.28.9", askPython: (p) => answers[p] }), [
    "FLASHMLA_NCCL /opt/nccl/lib/libnccl.so.2.28.9 [FLASHMLA_NCCL=/opt/nccl/lib/libnccl.so.2.28.9]",
    "system libnccl.so.2 [the system loader]",
    "python /venv/site-packages/nvidia/nccl/lib/libnccl.so.2 [python3]",
    "python /usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2 [python]",
  ]);
});

test("ncclCandidates() reads a FLASHMLA_NCCL that names a folder as the libnccl.so.2 in it", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-nccl-dir-"));
  assert.deepEqual(steps({ override: dir, ...noPython }), [
    `FLASHMLA_NCCL ${path.join(dir, "libnccl.so.2")} [FLASHMLA_NCCL=${dir}]`,
    "system libnccl.so.2 [the system loader]",
  ]);
});

test("ncclCandidates() skips an unset or empty FLASHMLA_NCCL, and by default reads it from the environment", () => {
  assert.deepEqual(steps({ override: undefined, ...noPython }), ["system libnccl.so.2 [the system loader]"]);
  assert.deepEqual(steps({ override: "", ...noPython }), ["system libnccl.so.2 [the system loader]"]);
  const saved = process.env.FLASHMLA_NCCL;
  process.env.FLASHMLA_NCCL = "/from/the/environment/libnccl.so.2";
  try {
    assert.equal(steps(noPython)[0], "FLASHMLA_NCCL /from/the/environment/libnccl.so.2 [FLASHMLA_NCCL=/from/the/environment/libnccl.so.2]");
  } finally {
    if (saved === undefined) delete process.env.FLASHMLA_NCCL;
    else process.env.FLASHMLA_NCCL = saved;
  }
});

test("ncclCandidates() names each Python that has no NCCL and why, and tries a folder two interpreters share once", () => {
  const shared = "/venv/lib/python3.12/site-packages/nvidia/nccl/lib";
  const answers: Record<string, PythonNcclAnswer> = {
    python3: { ok: true, dirs: [shared] },
    python: { ok: true, dirs: [shared] },
    "python3.11": { ok: true, dirs: [] },
    pypy: { ok: false, reason: "not installed" },
  };
  assert.deepEqual(steps({ override: undefined, pythons: ["python3", "python", "python3.11", "pypy"], askPython: (p) => answers[p] }), [
    "system libnccl.so.2 [the system loader]",
    `python ${shared}/libnccl.so.2 [python3]`,
    "python3.11: no nvidia/nccl/lib in its environment",
    "pypy: not installed",
  ]);
});

test("ncclCandidates() starts Python only when the places before it have been tried", () => {
  const asked: string[] = [];
  const search = ncclCandidates({ override: "/x/libnccl.so.2", askPython: (p) => (asked.push(p), { ok: true, dirs: [] }) });
  search.next();
  search.next();
  assert.deepEqual(asked, [], "FLASHMLA_NCCL and the system loader need no Python");
  search.next();
  assert.deepEqual(asked, ["python3"]);
});

test("askPythonForNccl() says 'not installed' for an interpreter that is not there", () => {
  assert.deepEqual(askPythonForNccl("/nonexistent/flashmla-test/python3"), { ok: false, reason: "not installed" });
});

test("askPythonForNccl() returns the folders the interpreter prints, one a line", { skip: process.platform === "win32" && "needs a POSIX shell" }, () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "flashmla-fake-python-"));
  const lib = path.join(dir, "site-packages", "nvidia", "nccl", "lib");
  mkdirSync(lib, { recursive: true });
  // A stand-in interpreter: ignores its "-c script" and answers like the script would.
  const python = path.join(dir, "python3");
  writeFileSync(python, `#!/bin/sh\nprintf '%s\\n\\n' '${lib}'\n`);
  chmodSync(python, 0o755);
  assert.deepEqual(askPythonForNccl(python), { ok: true, dirs: [lib] });
  const failing = path.join(dir, "python-broken");
  writeFileSync(failing, "#!/bin/sh\nexit 3\n");
  chmodSync(failing, 0o755);
  const r = askPythonForNccl(failing);
  assert.equal(r.ok, false);
  if (!r.ok) assert.match(r.reason, /^failed \(Command failed: /);
});

test("askPythonForNccl() through a real python3, when there is one: never throws, and every folder it names exists", () => {
  const r = askPythonForNccl("python3");
  if (!r.ok) return assert.match(r.reason, /^(not installed|failed \(|no answer within)/);
  for (const dir of r.dirs) {
    assert.match(dir, /nvidia[/\\]nccl[/\\]lib$/);
    assert.ok(existsSync(dir), dir);
  }
});

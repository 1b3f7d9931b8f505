import assert from "node:assert/strict";
import type { DenseWorkspace, MlaSchedMeta, SparseWorkspace } from "../../src/mla/sched/MlaSchedMeta.js";

/** The dense workspace a call filled `meta` with (the schedule the GPU wrote, the merge flags). */
export function denseWorkspace(meta: MlaSchedMeta): DenseWorkspace {
  const ws = meta.workspace;
  assert.ok(ws !== undefined && ws.kind === "dense", "a dense call has filled the metadata");
  return ws;
}

/** The sparse workspace a call filled `meta` with. */
export function sparseWorkspace(meta: MlaSchedMeta): SparseWorkspace {
  const ws = meta.workspace;
  assert.ok(ws !== undefined && ws.kind === "sparse", "a sparse call has filled the metadata");
  return ws;
}

#!/usr/bin/env bash
# CI: the timing experiments and diagnostics behind macros (off in the shipped build) still compile,
# without spills, so a later session can time them at once: each line is one build of one kernel file
# (macros that are timed together; not every combination fits the registers: trace + EXP_ISSUE +
# an ablation with an order experiment can spill where neither alone does).
# (The shipped kernels are built --strict by `npm run build:kernels`; these go to a temporary folder.)
# The trace builds leave out MLA_FIRST_STAGGER: with it the trace's counters cost seesaw_fast 4 bytes of
# spill (a trace of the shipped seesaw_fast is taken so, a diagnostic; docs/dense-decode.md §24).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
builds=(
  "dense_seesaw_sm90.cu -DMLA_TRACE=48 -DMLA_FAST_LAZY_MAX=0 -DMLA_FIRST_STAGGER=0"
  "dense_seesaw_sm90.cu -DMLA_PIPE_EXP_ISSUE=2"
  "dense_seesaw_sm90.cu -DMLA_PIPE_EXP_ISSUE=1 -DMLA_FAST_LAZY_MAX=0"
  "dense_seesaw_sm90.cu -DMLA_TRACE=48 -DMLA_FIRST_STAGGER=0"
  "dense_seesaw_sm90.cu -DMLA_FIRST_STAGGER=0 -DMLA_H16_Q_FIRST=0"
  "dense_seesaw_sm90.cu -DMLA_PIPE_S0_FIRST=1 -DMLA_PIPE_QROPE_REGS=0 -DMLA_PIPE_LAZY_MAX=0 -DMLA_ABLATE_LOADS"
  "sparse_decode_sm90.cu -DMLA_TRACE=64 -DMLA_SPARSE_LAZY_MAX=0"
  "sparse_decode_sm90.cu -DMLA_TRACE=64"
  "dense_seesaw_sm90.cu -DMLA_DENSE_Q_TMA=0"
  "dense_seesaw_sm90.cu -DMLA_DENSE_STORE16=1"
  "dense_seesaw_sm90.cu -DMLA_PAIR_PREFETCH=0"
  "dense_seesaw_sm90.cu -DMLA_TRACE=48 -DMLA_TRACE_PART=1"
  "dense_seesaw_sm90.cu -DMLA_TRACE=48 -DMLA_TRACE_MB=1 -DMLA_MC_PREFETCH=0"
  "sparse_decode_sm90.cu -DMLA_SPARSE_H16_WT=0 -DMLA_SPARSE_H16_PIPE=1"
  "sparse_decode_sm90.cu -DMLA_SPARSE_H16_DUAL=1 -DMLA_TRACE=64"
  "sparse_decode_sm90.cu -DMLA_ABLATE_SPARSE_CONSUMERS -DMLA_ABLATE_SPARSE_DEQUANT -DMLA_TRACE=64"
  "sparse_decode_sm90.cu -DMLA_SPARSE_H16_WT=0 -DMLA_SPARSE_H16_RR3=1"
  "sparse_decode_sm90.cu -DMLA_SPARSE_H16_WT=1"
  "sparse_decode_sm90.cu -DMLA_SPARSE_H16_OPT_MAX=0 -DMLA_PDL_EARLY_UNSPLIT=0"
  "sparse_decode_sm90.cu -DMLA_SPARSE_H16X_FINE=1 -DMLA_SPARSE_H16X_NOWALK=0 -DMLA_SPARSE_H16X_STAGES=3 -DMLA_SPARSE_H16X_PSCALE=0"
  "sparse_decode_sm90.cu -DMLA_ABLATE_SPARSE_PRODUCER -DMLA_TRACE=64"
  "sparse_decode_sm90.cu -DMLA_SPARSE_H16X_CONSUMER_REGS=232 -DMLA_SPARSE_H16X_QK_DEPTH=3"
  "sparse_decode_sm90.cu -DMLA_DESC_ADD=0"
)
pids=()
for i in "${!builds[@]}"; do
  read -r file flags <<< "${builds[$i]}"
  ( log=$(nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -cubin -Xptxas -v $flags -o "$out/$i.cubin" "kernels/mla_decode/$file" 2>&1) ||
      { echo "$log" | tail -20; echo "checkExperiments: $file $flags does not compile" >&2; exit 1; }
    if echo "$log" | grep -E "bytes spill (stores|loads)" | grep -vq " 0 bytes spill stores, 0 bytes spill loads"; then
      echo "checkExperiments: $file $flags spills" >&2; exit 1; fi
    if echo "$log" | grep -qE "C75(10|15|20)"; then echo "checkExperiments: $file $flags serializes wgmma" >&2; exit 1; fi
    echo "checkExperiments: ok: $file $flags" ) &
  pids+=($!)
done
# The device probes (host and device code) include the kernels' headers: they must keep compiling too.
for probe in gather-probe smem-probe l2-probe; do
  ( nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -c -o "$out/$probe.o" "scripts/device/$probe.cu" > "$out/$probe.log" 2>&1 ||
      { tail -20 "$out/$probe.log"; echo "checkExperiments: scripts/device/$probe.cu does not compile" >&2; exit 1; }
    echo "checkExperiments: ok: scripts/device/$probe.cu" ) &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
node --check scripts/device/traceDense.mjs && node --check scripts/device/traceSparse.mjs && node --check scripts/device/hostTime.mjs
[ $failed = 0 ]

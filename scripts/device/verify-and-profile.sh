#!/usr/bin/env bash
# Device-call driver (run from the project root on the GPU host, after `bash ../shared/gpu/bundle.sh`
# here and with carry [".gpu", "dist"]):
#   STEPS="dense sparse bench-dense bench-sparse" bash scripts/device/verify-and-profile.sh $OUT
# Each step runs under its own time limit (a hung kernel costs that limit, not the call), its summary goes
# to stdout and its whole log to $OUT/verify.log; bench steps write JSON into $OUT (at most 8 files come
# back, so steps share files where they can). Steps:
#   dense, sparse, fp8, runtime, bench-suite, reliability   the GPU test files of that area
#   bench-dense        the dense headline cases for seesaw, seesaw_fast and v1
#   bench-sparse       the sparse cases for each of SPARSE_KERNELS (default: sparse_v2, sparse_v3,
#                      sparse_crossover_v2, sparse_crossover_v3)
#   dequant            the exhaustive FP8 dequantization test
# To time a build variant, build it here into another folder under dist (scripts/buildExperiments.sh, which packs them into dist/e/x.tgz, or NVCC_EXTRA_FLAGS=...
# FLASHMLA_KERNEL_DIR=dist/kernels-x node scripts/buildKernels.mjs) and run any step with
# FLASHMLA_KERNEL_DIR=dist/kernels-x set on the call.
#   variants           test/gpu/variants: kernels written without a GPU (seesaw_mc, sparse producer v2)
#   sanitize-variants  compute-sanitizer over each of those files
#   sanitize           compute-sanitizer (SANITIZE_TOOLS, default all four) over test/gpu/sanitize; API errors
#                      are not reported: Kernel.paramInfo() probes cuFuncGetParamInfo past the last
#                      parameter on purpose (memcheck counted 14 such, one per kernel, and no memory error)
#   bench-dirs         the headline cases (or BENCH_DIR_CASES) for BENCH_DIR_KERNELS (default dense_seesaw_fast sparse_v2) from
#                      each kernel folder of BENCH_DIRS, e.g. "dist/kernels-ctl dist/kernels", in one call
#   racecheck-probe    build scripts/device/racecheck-probe.cu on the host and run it plain and under racecheck
#   bench-all          flashmla bench --all with JSON and SVG
#   check-sparse, check-dense   flashmla check over FlashMLA's sparse grid (368 cases) / dense grid (2,336)
#   reliability-full   the reliability suite at full size (500 + 200 fuzz cases, 10,000 soak calls)
#   fuzz-dense, fuzz-sparse, soak, out-of-range   the same, one part at a time (each its own limit; FUZZ_DENSE_CASES
#                      overrides the dense fuzz's 500, ~0.55 s a case on the H200)
#   ncu-breakdown      the sub-metrics behind the SOL percentages (L1, SM, memory) for each NCU_JOBS entry
#                      ("kernel-regex:case:bench-kernel ...", e.g. "mla_sparse_decode_crossover_v2_bf16:sparse-v32:sparse_crossover_v2";
#                      default: NCU_KERNEL, NCU_CASE, NCU_BENCH_KERNEL, else seesaw_fast at dense-compute)
#   ncu                source-level Nsight Compute profile of each NCU_JOBS entry (profile-source-<bench kernel>.csv); summarize
#                      the CSV it returns here with node scripts/ncuSummary.mjs profile-source.csv
set -u
out=${1:?usage: verify-and-profile.sh OUTDIR}
mkdir -p "$out" || exit 2  # a missing folder made every step fail at once (fifth session)
log="$out/verify.log"
steps=${STEPS:-"dense sparse bench-dense bench-sparse"}
export FLASHMLA_REQUIRE_GPU=1 FLASHMLA_DENSE_GRID=${FLASHMLA_DENSE_GRID:-quick} FLASHMLA_SPARSE_GRID=${FLASHMLA_SPARSE_GRID:-quick}
# Bench records name the commit the kernels were built from here (the host's copy of .git may be stale).
FLASHMLA_COMMIT=$(sed -n 's/.*"sourceCommit": "\([^"]*\)".*/\1/p' dist/kernels/manifest.json | head -1)
export FLASHMLA_COMMIT
export FLASHMLA_FUZZ_CASES=${FLASHMLA_FUZZ_CASES:-60} FLASHMLA_SOAK_CALLS=${FLASHMLA_SOAK_CALLS:-1000}
run() {  # name limit command...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "===== $name" >> "$log"
  timeout -k 10 "$limit" bash .gpu/enter.sh "$@" > "$out/step.tmp" 2>&1
  local rc=$?
  last_rc=$rc
  echo "== $name rc=$rc ($((SECONDS - t0)) s)"
  grep -E "^# (tests|pass|fail|skipped)|^ *# [0-9]|not ok|Error|error:|dense-|sparse-|ERROR SUMMARY|========= " "$out/step.tmp" | grep -v "^# Subtest" | cut -c1-160 | head -40
  cat "$out/step.tmp" >> "$log"
  rm -f "$out/step.tmp"
}
gpu_test() { run "test $1" "$2" node --test --test-concurrency=1 --test-reporter=tap "${@:3}"; }
# ncu jobs: "kernel-regex:case:bench-kernel ..." (default: one job from NCU_KERNEL, NCU_CASE, NCU_BENCH_KERNEL)
ncu_jobs=${NCU_JOBS:-"${NCU_KERNEL:-mla_dense_seesaw_fast_bf16}:${NCU_CASE:-dense-compute}:${NCU_BENCH_KERNEL:-dense_seesaw_fast}"}
dense_cases="dense-compute dense-compute-mtp dense-mem-h16 dense-mem-h64 dense-b1 dense-uneven dense-short-h16"
# Experiment folders come packed (scripts/buildExperiments.sh): unpack them once, before the first step.
if [ -f dist/e/x.tgz ] && [ ! -f dist/e/.unpacked ]; then
  tar xzf dist/e/x.tgz && touch dist/e/.unpacked && echo "unpacked $(tar tzf dist/e/x.tgz | grep -c '/manifest.json$') experiment folders from dist/e/x.tgz"
fi
for step in $steps; do
  case $step in
    dense) gpu_test dense 240 dist/test/gpu/mla/denseDecode.test.js dist/test/gpu/mla/lazyMax.test.js dist/test/gpu/mla/wgmmaProbe.test.js ;;
    variants) gpu_test variants 150 dist/test/gpu/variants ;;  # the kernels not yet run on a GPU, apart
    sanitize-variants) for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
        for f in dist/test/gpu/variants/*.test.js; do
          run "compute-sanitizer $tool $(basename "$f")" ${SANITIZE_LIMIT:-120} compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 99 node "$f"; done; done ;;
    dequant) gpu_test dequant 60 dist/test/gpu/mla/sparseDequant.test.js ;;
    sparse) gpu_test sparse 300 dist/test/gpu/mla/sparseDecode.test.js dist/test/gpu/mla/sparseLazyMax.test.js dist/test/gpu/mla/sparseH16.test.js dist/test/gpu/mla/sparseH16x.test.js
      [ "$last_rc" = 124 ] && sparse_hung=1 ;;
    fp8) gpu_test fp8 60 dist/test/gpu/mla/fp8KvWriter.test.js ;;
    runtime) gpu_test runtime 120 dist/test/gpu/runtime ;;
    bench-suite) gpu_test bench-suite 200 dist/test/gpu/bench ;;
    reliability) gpu_test reliability 300 dist/test/gpu/reliability ;;
    bench-dense) for k in ${DENSE_KERNELS:-dense_seesaw dense_seesaw_fast dense_v1}; do
        run "bench $k" 120 node dist/src/cli/cli.js bench --case $dense_cases --kernel $k --json "$out/bench-$k.json"; done ;;
    racecheck-probe)  # scripts/device/racecheck-probe.cu, built here, plain and under racecheck
      echo "===== racecheck-probe" >> "$log"
      nvcc -std=c++17 -O2 -gencode arch=compute_90a,code=sm_90a -lineinfo -o /tmp/racecheck-probe scripts/device/racecheck-probe.cu >> "$log" 2>&1 &&
        { timeout -k 5 ${PROBE_LIMIT:-60} /tmp/racecheck-probe; timeout -k 5 ${PROBE_LIMIT:-60} compute-sanitizer --tool racecheck /tmp/racecheck-probe; } > "$out/racecheck-probe.txt" 2>&1
      echo "== racecheck-probe rc=$?"
      grep -E "^mode|probe:|Race reported|RACECHECK SUMMARY" "$out/racecheck-probe.txt" | cut -c1-160 ;;
    bench-dirs)  # the headline cases per kernel folder of BENCH_DIRS (a control build beside this one)
      for d in ${BENCH_DIRS:?set BENCH_DIRS}; do for k in ${BENCH_DIR_KERNELS:-dense_seesaw_fast sparse_v2}; do
        export FLASHMLA_KERNEL_DIR=$d
        run "bench $k ($d)" ${BENCH_DIR_LIMIT:-120} node dist/src/cli/cli.js bench --case ${BENCH_DIR_CASES:-$dense_cases sparse-v32 sparse-v32-h64 sparse-long-topk sparse-h16} --kernel $k --json "$out/bench-$(basename "$d")-$k.json"
        unset FLASHMLA_KERNEL_DIR; done; done ;;
    bench-dense-grid) run "bench grid" 200 node dist/src/cli/cli.js bench --case dense-grid --kernel ${KERNEL:-dense_seesaw} --json "$out/bench-grid.json" ;;
    bench-sparse) [ -n "${sparse_hung:-}" ] && { echo "== bench-sparse skipped: the sparse test hung"; continue; }
      for k in ${SPARSE_KERNELS:-sparse_v2 sparse_v3 sparse_crossover_v2 sparse_crossover_v3}; do
        run "bench $k" 150 node dist/src/cli/cli.js bench --case sparse-v32 sparse-v32-h64 sparse-long-topk sparse-h16 --kernel $k --json "$out/bench-$k.json"; done ;;
    ncu)  # source-level profile of each NCU_JOBS entry; the report stays in /tmp, its pages go to the log and a CSV
      for job in $ncu_jobs; do IFS=: read -r nk nc nb <<< "$job"
        echo "===== ncu $nk $nc" >> "$log"
        timeout ${NCU_LIMIT:-200} ncu --clock-control none --kernel-name regex:$nk --launch-count 1 --section SpeedOfLight \
          --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --import-source yes -o /tmp/profile -f \
          bash .gpu/enter.sh node dist/src/cli/cli.js bench --case $nc --kernel $nb --iters 20 >> "$log" 2>&1
        echo "== ncu $nk rc=$?"
        ncu --import /tmp/profile.ncu-rep --page source --print-source sass --csv > "$out/profile-source-$nb.csv" 2>> "$log"
        ncu --import /tmp/profile.ncu-rep --page details >> "$log" 2>&1
        echo "source csv ($nb): $(wc -l < "$out/profile-source-$nb.csv") lines"; done ;;
    ncu-breakdown)  # which sub-unit sets the SOL figures (it found the sparse kernels' L1 bound): breakdown metrics, one launch per job
      for job in $ncu_jobs; do IFS=: read -r nk nc nb <<< "$job"
        echo "===== ncu-breakdown $nk $nc" >> "$log"
        timeout ${NCU_LIMIT:-150} ncu --clock-control none --kernel-name regex:$nk --launch-count 1 \
          --metrics breakdown:l1tex__throughput.avg.pct_of_peak_sustained_elapsed,breakdown:sm__throughput.avg.pct_of_peak_sustained_elapsed,breakdown:gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__m_xbar2l1tex_read_bytes.sum \
          bash .gpu/enter.sh node dist/src/cli/cli.js bench --case $nc --kernel $nb --iters 20 > "$out/step.tmp" 2>&1
        echo "== ncu-breakdown $nk rc=$?"
        grep -vE "^==PROF==|^│|^┌|^└|^├" "$out/step.tmp" | grep -E "^ +[a-z_0-9]+__|Section|mla_" | tee -a "$out/ncu-breakdown-$nb.txt" | grep -E "lsu_wavefronts|cycles_elapsed|tensor_cycles|dram__cycles|lts__t_sectors\.|issue_active|^ +mla_"
        cat "$out/step.tmp" >> "$log"; rm -f "$out/step.tmp"; done ;;
    check-sparse) run "check --grid sparse" ${CHECK_LIMIT:-300} node dist/src/cli/cli.js check --grid sparse ;;
    check-dense) run "check --grid flashmla" ${CHECK_LIMIT:-300} node dist/src/cli/cli.js check --grid flashmla ;;
    bench-all) run "bench --all" ${BENCH_ALL_LIMIT:-200} node dist/src/cli/cli.js bench --all --json "$out/bench-all.json" --svg "$out/bench-all.svg" ;;
    reliability-full) FLASHMLA_FUZZ_CASES=500 FLASHMLA_SPARSE_FUZZ_CASES=200 FLASHMLA_SOAK_CALLS=10000 gpu_test reliability-full ${RELIABILITY_LIMIT:-300} dist/test/gpu/reliability ;;
    # The same suite file by file at full size (the dense fuzz alone took 227 s on the H200).
    fuzz-dense) FLASHMLA_FUZZ_CASES=${FUZZ_DENSE_CASES:-500} gpu_test fuzz-dense 300 dist/test/gpu/reliability/fuzz.test.js ;;
    fuzz-sparse) FLASHMLA_SPARSE_FUZZ_CASES=200 gpu_test fuzz-sparse 200 dist/test/gpu/reliability/sparseFuzz.test.js ;;
    soak) FLASHMLA_SOAK_CALLS=10000 gpu_test soak 300 dist/test/gpu/reliability/soak.test.js ;;
    out-of-range) gpu_test out-of-range 120 dist/test/gpu/reliability/outOfRange.test.js dist/test/gpu/reliability/outOfMemory.test.js ;;
    sanitize) for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
        run "compute-sanitizer $tool" ${SANITIZE_LIMIT:-120} compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 99 node dist/test/gpu/sanitize/everyKernel.test.js; done ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done

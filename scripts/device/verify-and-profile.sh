#!/usr/bin/env bash
# One device call that verifies what was written without a GPU and measures it (run from the project
# root on the GPU host, after `bash ../shared/gpu/bundle.sh` here and with carry [".gpu", "dist"]):
#   bash scripts/device/verify-and-profile.sh $OUT
# 1. the GPU suites (quick dense/sparse grids, reduced fuzz/soak), each under its own time limit,
# 2. bench of the dense headline cases for seesaw and seesaw_fast, and of the sparse cases with and
#    without crossover,
# 3. a source-level Nsight Compute profile of the seesaw kernel at dense-compute (which instructions
#    the warps stall on), as CSV.
# At most 8 files come back from $OUT: every log goes into verify.log; 4 bench JSONs; 2 ncu files.
set -u
out=${1:?usage: verify-and-profile.sh OUTDIR}
log="$out/verify.log"
export FLASHMLA_REQUIRE_GPU=1 FLASHMLA_DENSE_GRID=${FLASHMLA_DENSE_GRID:-quick} FLASHMLA_SPARSE_GRID=${FLASHMLA_SPARSE_GRID:-quick}
# Reduced fuzz/soak here (the full 500 cases / 10,000 calls take minutes each: run them once alone).
export FLASHMLA_FUZZ_CASES=${FLASHMLA_FUZZ_CASES:-60} FLASHMLA_SOAK_CALLS=${FLASHMLA_SOAK_CALLS:-1000}
for suite in runtime mla bench reliability; do
  echo "===== test-gpu $suite" >> "$log"
  timeout 240 bash -c "bash .gpu/enter.sh node --test --test-concurrency=1 dist/test/gpu/$suite" > "$out/suite.tmp" 2>&1
  echo "test-gpu $suite rc=$?" | tee -a "$log"
  grep -E "^# (tests|pass|fail|skipped)|^not ok|^    not ok" "$out/suite.tmp"
  cat "$out/suite.tmp" >> "$log"
done
for k in dense_seesaw dense_seesaw_fast; do
  echo "===== bench $k" >> "$log"
  timeout 120 bash -c "bash .gpu/enter.sh node dist/src/cli/cli.js bench --kernel $k --json $out/bench-$k.json" > "$out/suite.tmp" 2>&1
  echo "bench $k rc=$?" | tee -a "$log"; grep -E "dense-" "$out/suite.tmp" | cut -c1-110; cat "$out/suite.tmp" >> "$log"
done
for k in sparse_v1 sparse_crossover; do
  echo "===== bench $k" >> "$log"
  timeout 150 bash -c "bash .gpu/enter.sh node dist/src/cli/cli.js bench --case sparse-v32 sparse-v32-h64 sparse-long-topk sparse-h16 --kernel $k --json $out/bench-$k.json" > "$out/suite.tmp" 2>&1
  echo "bench $k rc=$?" | tee -a "$log"; grep -E "sparse-" "$out/suite.tmp" | cut -c1-110; cat "$out/suite.tmp" >> "$log"
done
rm -f "$out/suite.tmp"
echo "===== ncu" >> "$log"
timeout 200 ncu --clock-control none --kernel-name regex:mla_dense_seesaw_bf16 --launch-count 1 --section WarpStateStats \
  --section SourceCounters --import-source yes -o "$out/seesaw" -f \
  bash .gpu/enter.sh node dist/src/cli/cli.js bench --case dense-compute --iters 2 >> "$log" 2>&1
echo "ncu rc=$?" | tee -a "$log"
ncu --import "$out/seesaw.ncu-rep" --page source --print-source sass --csv > "$out/seesaw-source.csv" 2>> "$log"
echo "source csv: $(wc -l < "$out/seesaw-source.csv") lines" | tee -a "$log"

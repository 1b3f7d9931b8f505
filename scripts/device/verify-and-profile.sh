#!/usr/bin/env bash
# One device call that verifies what was written without a GPU and measures it (run from the project
# root on the GPU host, after `bash ../shared/gpu/bundle.sh` here and with carry [".gpu", "dist"]):
#   bash scripts/device/verify-and-profile.sh $OUT
# 1. the GPU suite (dense grid in quick mode; includes the sparse kernel and seesaw_fast tests),
# 2. bench of the dense headline cases for seesaw and seesaw_fast, and of the sparse cases with and
#    without crossover,
# 3. a source-level Nsight Compute profile of the seesaw kernel at dense-compute (which instructions
#    the warps stall on), as CSV.
set -u
out=${1:?usage: verify-and-profile.sh OUTDIR}
run() { bash .gpu/enter.sh "$@"; }
export FLASHMLA_REQUIRE_GPU=1 FLASHMLA_DENSE_GRID=${FLASHMLA_DENSE_GRID:-quick}
timeout 300 bash -c 'bash .gpu/enter.sh node --test --test-concurrency=1 dist/test/gpu' > "$out/test-gpu.log" 2>&1
echo "test-gpu rc=$?"; grep -E "^# (tests|pass|fail|skipped)|^not ok|^    not ok" "$out/test-gpu.log"
for k in dense_seesaw dense_seesaw_fast; do
  timeout 120 bash -c "bash .gpu/enter.sh node dist/src/cli/cli.js bench --kernel $k --json $out/bench-$k.json" > "$out/bench-$k.txt" 2>&1
  echo "bench $k rc=$?"; grep -E "dense-" "$out/bench-$k.txt" | cut -c1-110
done
for k in sparse_v1 sparse_crossover; do
  timeout 150 bash -c "bash .gpu/enter.sh node dist/src/cli/cli.js bench --case sparse-v32 sparse-v32-h64 sparse-long-topk sparse-h16 --kernel $k --json $out/bench-$k.json" > "$out/bench-$k.txt" 2>&1
  echo "bench $k rc=$?"; grep -E "sparse-" "$out/bench-$k.txt" | cut -c1-110
done
timeout 200 ncu --clock-control none --kernel-name regex:mla_dense_seesaw_bf16 --launch-count 1 --section WarpStateStats \
  --section SourceCounters --import-source yes -o "$out/seesaw" -f \
  bash .gpu/enter.sh node dist/src/cli/cli.js bench --case dense-compute --iters 2 > "$out/ncu-run.txt" 2>&1
echo "ncu rc=$?"
ncu --import "$out/seesaw.ncu-rep" --page source --print-source sass --csv > "$out/seesaw-source.csv" 2> "$out/ncu-import.txt"
echo "source csv: $(wc -l < "$out/seesaw-source.csv") lines"

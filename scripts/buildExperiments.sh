#!/usr/bin/env bash
# Builds one kernel folder per timing experiment, for a device call that times them beside the shipped
# build (`BENCH_DIRS=... STEPS=bench-dirs`, see scripts/device/verify-and-profile.sh):
#   bash scripts/buildExperiments.sh "ablate:-DMLA_ABLATE_LOADS" "wgmbar:-DMLA_DENSE_WG_MBARRIERS=1"
# builds dist/kernels-ablate and dist/kernels-wgmbar (--strict: no spills), packs every dist/kernels-*
# folder into dist/e/x.tgz and prints the BENCH_DIRS value. A folder is ~4.7 MB, ~0.4-1 MB packed, so
# carry [".gpu", "dist/src", "dist/test", "dist/bench", "dist/kernels", "dist/e"] (not the folders):
# verify-and-profile.sh unpacks the archive before its first step. Builds run in parallel.
set -euo pipefail
dirs="dist/kernels"
pids=()
for spec in "$@"; do
  name=${spec%%:*} flags=${spec#*:}
  [ "$name" != "$spec" ] && [ -n "$name" ] || { echo "expected NAME:FLAGS, got '$spec'" >&2; exit 2; }
  dirs="$dirs dist/kernels-$name"
done
for spec in "$@"; do
  name=${spec%%:*} flags=${spec#*:}
  ( if ! log=$(NVCC_EXTRA_FLAGS="$flags" FLASHMLA_KERNEL_DIR="dist/kernels-$name" node scripts/buildKernels.mjs --strict 2>&1); then
      echo "$log" | tail -20 >&2; echo "build of dist/kernels-$name ($flags) failed" >&2; exit 1
    fi
    echo "== dist/kernels-$name ($flags): $(echo "$log" | grep -cE "^built") modules built" ) &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[ $failed = 0 ] || exit 1
mkdir -p dist/e
rm -f dist/e/x.tgz
# Every experiment folder there is (also those of earlier runs of this script), so one archive carries all.
tar czf dist/e/x.tgz $(ls -d dist/kernels-* 2>/dev/null)
echo "packed $(ls -d dist/kernels-* | wc -l) folders into dist/e/x.tgz ($(du -h dist/e/x.tgz | cut -f1))"
echo "BENCH_DIRS=\"$dirs\""

#!/usr/bin/env bash
# Builds one kernel folder per timing experiment, for a device call that times them beside the shipped
# build (`BENCH_DIRS=... STEPS=bench-dirs`, see scripts/device/verify-and-profile.sh):
#   bash scripts/buildExperiments.sh "ablate:-DMLA_ABLATE_LOADS" "wgmbar:-DMLA_DENSE_WG_MBARRIERS=1"
# builds dist/kernels-ablate and dist/kernels-wgmbar (--strict: no spills) and prints the BENCH_DIRS value.
# Each folder is ~4.7 MB; with .gpu (~30 MB) five fit the device call's 64 MiB carry.
set -euo pipefail
dirs="dist/kernels"
for spec in "$@"; do
  name=${spec%%:*} flags=${spec#*:}
  [ "$name" != "$spec" ] && [ -n "$name" ] || { echo "expected NAME:FLAGS, got '$spec'" >&2; exit 2; }
  echo "== dist/kernels-$name ($flags)"
  if ! log=$(NVCC_EXTRA_FLAGS="$flags" FLASHMLA_KERNEL_DIR="dist/kernels-$name" node scripts/buildKernels.mjs --strict 2>&1); then
    echo "$log" | tail -20 >&2; echo "build of dist/kernels-$name failed" >&2; exit 1
  fi
  echo "$log" | grep -cE "^built" | sed 's/$/ modules built/'
  dirs="$dirs dist/kernels-$name"
done
echo "BENCH_DIRS=\"$dirs\""

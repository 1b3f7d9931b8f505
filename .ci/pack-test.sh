#!/usr/bin/env bash
# The packed package, installed the way a user installs it: `npm pack`, then `npm install <tarball>`
# into an empty folder, then its CLI. nvcc is shadowed by a stub that fails, so a step that needs the
# CUDA toolkit fails here too. Needs dist/ and dist/kernels/ built first (npm run build, build:kernels).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "pack-test: FAILED: $*" >&2
  exit 1
}

[ -f dist/src/cli/cli.js ] || fail "dist/src/cli/cli.js missing: run npm run build first"
[ -f dist/kernels/manifest.json ] || fail "dist/kernels/manifest.json missing: run npm run build:kernels first"

echo "-- npm pack"
tgz=$(npm pack --silent --pack-destination "$work" | tail -n 1) || fail "npm pack"
tarball="$work/$tgz"
[ -f "$tarball" ] || fail "npm pack made no tarball ($tgz)"
tar -tzf "$tarball" | sed 's#^package/##' | sort >"$work/contents"
echo "   $(wc -l <"$work/contents") files, $(du -k "$tarball" | cut -f1) KiB: $tgz"
for f in package.json README.md dist/src/index.js dist/src/cli/cli.js dist/kernels/manifest.json; do
  grep -qx "$f" "$work/contents" || fail "$f is not in the tarball"
done
# Every module the manifest lists must ship as a cubin.
node -e '
  const m = JSON.parse(require("fs").readFileSync("dist/kernels/manifest.json", "utf8"));
  const names = Array.isArray(m.kernels) ? m.kernels.map((k) => k.name) : Object.keys(m.kernels);
  console.log(names.join("\n"));
' >"$work/modules"
[ -s "$work/modules" ] || fail "dist/kernels/manifest.json lists no kernels"
while read -r name; do
  grep -qx "dist/kernels/$name.cubin" "$work/contents" || fail "dist/kernels/$name.cubin (listed in manifest.json) is not in the tarball"
done <"$work/modules"
if grep -q '^dist/test/' "$work/contents"; then fail "the tests (dist/test) are in the tarball"; fi

echo "-- npm install <tarball> into an empty folder (nvcc shadowed)"
mkdir -p "$work/bin" "$work/app"
printf '#!/bin/sh\necho "pack-test: nvcc was called ($*); the installed package must not need it" >&2\nexit 97\n' >"$work/bin/nvcc"
chmod +x "$work/bin/nvcc"
export PATH="$work/bin:$PATH"
cd "$work/app"
echo '{ "name": "flashmla-pack-test", "version": "1.0.0", "private": true, "type": "module" }' >package.json
npm install --no-audit --no-fund --loglevel=error "$tarball" || fail "npm install $tgz"

echo "-- npx flashmla info"
npx --no flashmla info >"$work/info.txt" 2>&1 || { cat "$work/info.txt"; fail "flashmla info exited $?"; }
cat "$work/info.txt"

echo "-- npx flashmla roofline --case dense-compute"
npx --no flashmla roofline --case dense-compute >"$work/roofline.txt" 2>&1 || { cat "$work/roofline.txt"; fail "flashmla roofline exited $?"; }
cat "$work/roofline.txt"
grep -q "FLOPs      292,057,776,128" "$work/roofline.txt" || fail "flashmla roofline printed no FLOP count for dense-compute"

echo "-- the library from the installed package"
node --input-type=module -e '
  const m = await import("flashmla-ts");
  if (typeof m.mlaDecodeReference !== "function") throw new Error("flashmla-ts exports no mlaDecodeReference");
  console.log("   import(\"flashmla-ts\"): " + Object.keys(m).length + " exports");
' || fail "import of flashmla-ts from the installed package"

echo "pack-test: ok"

#!/usr/bin/env bash
# The packed package, installed the way a user installs it: `npm pack` (whose prepack step builds the
# library and the production kernels), then `npm install <tarball>` into an empty folder, then its CLI.
# First, packing without nvcc must fail and make no tarball. For the install, nvcc is shadowed by a stub
# that fails, so a step that needs the CUDA toolkit fails there too.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "pack-test: FAILED: $*" >&2
  exit 1
}

mkdir -p "$work/bin" "$work/app" "$work/nonvcc"
printf '#!/bin/sh\necho "pack-test: nvcc was called ($*); the installed package must not need it" >&2\nexit 97\n' >"$work/bin/nvcc"
chmod +x "$work/bin/nvcc"

echo "-- npm pack without nvcc: refused, no tarball"
built_before=$([ -f dist/src/cli/cli.js ] && echo yes || echo no)
if env -u NVCC PATH="$work/bin:$PATH" npm pack --pack-destination "$work/nonvcc" >"$work/nonvcc.log" 2>&1; then
  cat "$work/nonvcc.log"
  fail "npm pack succeeded with a broken nvcc"
fi
grep -q "prepack: 'nvcc --version' failed\. The package ships the compiled CUDA kernels" "$work/nonvcc.log" || { cat "$work/nonvcc.log"; fail "npm pack without nvcc did not say why it failed"; }
[ -z "$(ls -A "$work/nonvcc")" ] || fail "npm pack without nvcc left $(ls "$work/nonvcc")"
if [ "$built_before" = yes ] && [ ! -f dist/src/cli/cli.js ]; then fail "npm pack without nvcc removed dist/src"; fi

echo "-- npm pack (prepack: tsc -p tsconfig.build.json, the kernels --strict)"
tgz=$(env -u FLASHMLA_KERNEL_DIR -u NVCC_EXTRA_FLAGS npm pack --silent --pack-destination "$work" | tail -n 1) || fail "npm pack"
tarball="$work/$tgz"
[ -f "$tarball" ] || fail "npm pack made no tarball ($tgz)"
tar -tzf "$tarball" | sed 's#^package/##' | sort >"$work/contents"
echo "   $(wc -l <"$work/contents") files, $(du -k "$tarball" | cut -f1) KiB packed, $(tar -xzOf "$tarball" | wc -c | awk '{printf "%.1f", $1 / 1048576}') MiB unpacked: $tgz"
for f in package.json README.md LICENSE docs/ARCHITECTURE.md dist/src/index.js dist/src/index.d.ts dist/src/cli/cli.js dist/kernels/manifest.json; do
  grep -qx "$f" "$work/contents" || fail "$f is not in the tarball"
done
# Only what a user runs or reads: no tests, kernel sources, scripts, probes, patches or source maps.
if grep -vE '^(package\.json|README\.md|LICENSE|docs/[^/]+\.md|dist/src/.+\.(js|d\.ts)|dist/kernels/manifest\.json|dist/kernels/[^/]+\.cubin)$' "$work/contents" >"$work/unexpected"; then
  head -20 "$work/unexpected"
  fail "the tarball holds $(wc -l <"$work/unexpected") file(s) a user does not need (above)"
fi
if grep -q '\.map$' "$work/contents"; then fail "the tarball holds source maps"; fi
if grep -q '^dist/test/' "$work/contents"; then fail "the tests (dist/test) are in the tarball"; fi

# The shipped manifest lists exactly the shipped cubins, and none of the test-only ones.
mkdir -p "$work/unpacked"
tar -xzf "$tarball" -C "$work/unpacked" package/dist/kernels/manifest.json
node -e '
  const m = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  const names = Array.isArray(m.kernels) ? m.kernels.map((k) => k.name) : Object.keys(m.kernels);
  for (const name of names) {
    const source = String((Array.isArray(m.kernels) ? m.kernels.find((k) => k.name === name) : m.kernels[name]).source ?? "");
    if (source.startsWith("kernels/testing/")) { console.error(`manifest.json lists the test-only ${name} (${source})`); process.exit(1); }
  }
  console.log(names.join("\n"));
' "$work/unpacked/package/dist/kernels/manifest.json" >"$work/modules" || fail "the shipped manifest lists a test-only kernel"
[ -s "$work/modules" ] || fail "dist/kernels/manifest.json lists no kernels"
while read -r name; do
  grep -qx "dist/kernels/$name.cubin" "$work/contents" || fail "dist/kernels/$name.cubin (listed in manifest.json) is not in the tarball"
done <"$work/modules"
sed -n 's#^dist/kernels/\(.*\)\.cubin$#\1#p' "$work/contents" | while read -r name; do
  grep -qx "$name" "$work/modules" || fail "dist/kernels/$name.cubin is in the tarball but not in its manifest.json"
done
for name in dequant_selftest wgmma_probe_sm90 test_fill; do
  if grep -q "$name" "$work/contents"; then fail "the test-only $name is in the tarball"; fi
done
echo "   $(wc -l <"$work/modules") kernels: $(tr '\n' ' ' <"$work/modules")"

echo "-- npm install <tarball> into an empty folder (nvcc shadowed)"
export PATH="$work/bin:$PATH"
unset FLASHMLA_KERNEL_DIR NVCC
cd "$work/app"
echo '{ "name": "flashmla-pack-test", "version": "1.0.0", "private": true, "type": "module" }' >package.json
npm install --no-audit --no-fund --loglevel=error "$tarball" || fail "npm install $tgz"

echo "-- npx flashmla info"
npx --no flashmla info >"$work/info.txt" 2>&1 || { cat "$work/info.txt"; fail "flashmla info exited $?"; }
cat "$work/info.txt"

echo "-- npx flashmla info --json: the kernels are present and verified"
npx --no flashmla info --json >"$work/info.json" 2>"$work/info.err" || { cat "$work/info.json" "$work/info.err"; fail "flashmla info --json exited $?"; }
# Relies on the report's kernels.{ok, dir, modules, problem}: ok once manifest.json and every cubin it
# lists match their sha256, modules the names it lists.
node -e '
  const fs = require("fs");
  const report = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  const k = report.kernels;
  if (!k || k.ok !== true) throw new Error(`kernels not usable: ${k && k.problem}`);
  const want = fs.readFileSync(process.argv[2], "utf8").trim().split("\n").sort();
  const got = [...k.modules].sort();
  if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`kernels.modules ${got} differ from the manifest: ${want}`);
  if (!fs.realpathSync(k.dir).startsWith(fs.realpathSync(process.argv[3]))) throw new Error(`kernels.dir ${k.dir} is not in the installed package`);
  console.log(`   kernels.ok: true, ${got.length} modules in ${k.dir}`);
' "$work/info.json" "$work/modules" "$work/app/node_modules/flashmla-ts/dist/kernels" || { cat "$work/info.json"; fail "flashmla info --json does not report the shipped kernels present"; }

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

// Where the warp samples of an Nsight Compute source-page CSV went (the CSV the device script's ncu step
// writes as $OUT/profile-source.csv): per window of SASS instructions and for the hottest instructions.
// Usage (after `npm run build`): node scripts/ncuSummary.mjs profile-source.csv [--window N] [--top N]
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { summarizeNcuSource, ncuSourceSummaryText } = await import(path.join(root, "dist/src/bench/ncuSourceSummary.js"));
const args = process.argv.slice(2);
const file = args.find((a, i) => !a.startsWith("--") && !args[i - 1]?.startsWith("--"));
if (file === undefined) {
  console.error("usage: node scripts/ncuSummary.mjs profile-source.csv [--window N] [--top N]");
  process.exit(2);
}
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : undefined;
};
try {
  process.stdout.write(ncuSourceSummaryText(summarizeNcuSource(readFileSync(file, "utf8"), { window: opt("--window"), top: opt("--top") })));
} catch (e) {
  console.error(`ncuSummary: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
}

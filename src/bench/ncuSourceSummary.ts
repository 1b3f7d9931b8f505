/**
 * Reads Nsight Compute's source page as CSV (`ncu --import R --page source --print-source sass --csv`,
 * what scripts/device/verify-and-profile.sh's ncu step writes) and says where the warps' samples went:
 * per window of consecutive SASS instructions (which, in a warp-specialized kernel, fall into one role's
 * code) and for the hottest instructions, each with its leading stall reasons.
 */

/** One SASS instruction of the page. */
export interface NcuInstruction {
  index: number;
  sass: string;
  samples: number;
  /** Stall reason (ncu's column name without "stall_") -> samples. */
  stalls: Record<string, number>;
}

/** A window of consecutive instructions. */
export interface NcuWindow {
  first: number;
  last: number;
  samples: number;
  /** The leading stall reasons, most samples first. */
  stalls: Array<[string, number]>;
  /** Opcodes of note in the window (HGMMA, LDG, SYNCS, BAR, F2FP, MUFU, STS, ...), in order of first appearance. */
  opcodes: string[];
}

export interface NcuSourceSummary {
  kernel: string;
  totalSamples: number;
  instructions: NcuInstruction[];
  windows: NcuWindow[];
  hottest: NcuInstruction[];
}

/** Splits one CSV line (double-quoted fields, "" inside quotes) into fields. */
export function splitCsvLine(line: string): string[] {
  const out: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quoted) {
      if (ch === '"' && line[i + 1] === '"') (field += '"'), i++;
      else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ",") out.push(field), (field = "");
    else field += ch;
  }
  out.push(field);
  return out;
}

const NOTABLE = /^(?:@!?U?P\d+\s+)?(HGMMA|LDG|LDS|STS|ST|LD|SYNCS|BAR|F2FP|MUFU|UBLKPF|UBLKCP|UTMALDG|STAS|CCTL|ERRBAR|MEMBAR|FENCE|WARPGROUP|SHFL)\b/;

/**
 * Parses the CSV and summarizes it. `window` instructions per window (default 150); windows with fewer
 * than `minWindowSamples` samples are left out (default 300); `top` hottest instructions (default 20).
 * @throws Error naming what is missing when the text is not ncu's source page.
 */
export function summarizeNcuSource(csv: string, opts: { window?: number; minWindowSamples?: number; top?: number } = {}): NcuSourceSummary {
  const lines = csv.split(/\r?\n/).filter((l) => l.trim() !== "");
  const first = lines.length > 0 ? splitCsvLine(lines[0]) : [];
  if (first[0] !== "Kernel Name") throw new Error(`not an ncu source page: the first line should start with "Kernel Name", got ${JSON.stringify(first[0] ?? "")}`);
  const header = splitCsvLine(lines[1] ?? "");
  const col = (name: string): number => {
    const i = header.indexOf(name);
    if (i < 0) throw new Error(`not an ncu source page: no "${name}" column`);
    return i;
  };
  const source = col("Source");
  const samples = col("Warp Stall Sampling (All Samples)");
  // The all-samples stall columns ("stall_x"); the "(Not Issued)" ones repeat them.
  const stallCols = header.map((h, i) => [h, i] as const).filter(([h]) => h.startsWith("stall_") && !h.endsWith("(Not Issued)"));
  const num = (v: string | undefined): number => {
    const n = Number(v);
    return Number.isFinite(n) ? n : 0;
  };
  const instructions: NcuInstruction[] = lines.slice(2).map((line, index) => {
    const f = splitCsvLine(line);
    const stalls: Record<string, number> = {};
    for (const [h, i] of stallCols) if (num(f[i]) > 0) stalls[h.slice("stall_".length)] = num(f[i]);
    return { index, sass: (f[source] ?? "").trim(), samples: num(f[samples]), stalls };
  });
  const win = opts.window ?? 150;
  const windows: NcuWindow[] = [];
  for (let s = 0; s < instructions.length; s += win) {
    const part = instructions.slice(s, s + win);
    const total = part.reduce((a, x) => a + x.samples, 0);
    if (total < (opts.minWindowSamples ?? 300)) continue;
    const stalls: Record<string, number> = {};
    for (const x of part) for (const [k, v] of Object.entries(x.stalls)) stalls[k] = (stalls[k] ?? 0) + v;
    const opcodes: string[] = [];
    for (const x of part) {
      const m = NOTABLE.exec(x.sass);
      const op = m ? x.sass.replace(/^@!?U?P\d+\s+/, "").split(/\s/)[0] : undefined;
      if (op !== undefined && !opcodes.includes(op)) opcodes.push(op);
    }
    windows.push({ first: s, last: s + part.length - 1, samples: total, stalls: Object.entries(stalls).sort((a, b) => b[1] - a[1]), opcodes });
  }
  const hottest = [...instructions].sort((a, b) => b.samples - a.samples).slice(0, opts.top ?? 20).sort((a, b) => a.index - b.index);
  return { kernel: first[1] ?? "", totalSamples: instructions.reduce((a, x) => a + x.samples, 0), instructions, windows, hottest };
}

/** The summary as text: one line per window, then the hottest instructions with their three leading stalls. */
export function ncuSourceSummaryText(s: NcuSourceSummary): string {
  const pct = (n: number): string => `${((100 * n) / Math.max(1, s.totalSamples)).toFixed(1)} %`;
  const top = (stalls: Array<[string, number]>): string => stalls.slice(0, 3).map(([k, v]) => `${k} ${v}`).join(", ");
  const out = [`${s.kernel}: ${s.totalSamples} warp samples over ${s.instructions.length} SASS instructions`, "windows (instructions first-last: samples, share, leading stalls; notable opcodes):"];
  for (const w of s.windows) out.push(`  ${w.first}-${w.last}: ${w.samples} (${pct(w.samples)}) ${top(w.stalls)}; ${w.opcodes.slice(0, 8).join(" ")}`);
  out.push("hottest instructions:");
  for (const x of s.hottest) {
    const stalls = Object.entries(x.stalls).sort((a, b) => b[1] - a[1]);
    out.push(`  ${x.index}: ${x.samples} (${pct(x.samples)}) ${x.sass.slice(0, 70)} | ${top(stalls)}`);
  }
  return `${out.join("\n")}\n`;
}

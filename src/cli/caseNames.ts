import { BENCH_CASES } from "../bench/cases.js";
import { closestName, type CliFailure } from "./cliErrors.js";

/** The hint after a bad case name: where the names are listed, with the kernel that serves each. */
export const CASE_LIST_HINT = "try flashmla bench --list";

/** The usage error for a case name that names nothing, with the nearest name when it looks like a typo. */
export function unknownCaseFailure(name: string): CliFailure {
  const groups = [...new Set(BENCH_CASES.flatMap((c) => (c.group !== undefined ? [c.group] : [])))];
  const near = closestName(name, [...BENCH_CASES.map((c) => c.name), ...groups]);
  return { kind: "usage", message: `unknown case '${name}'${near !== undefined ? `; did you mean ${near}?` : ""}`, hint: CASE_LIST_HINT };
}

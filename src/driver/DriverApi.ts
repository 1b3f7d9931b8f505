import type { bindings, DriverSymbol, OptionalDriverSymbol } from "./bindings.js";

type HandleType = "CUcontext" | "CUmodule" | "CUfunction" | "CUstream" | "CUevent" | "CUgraph" | "CUgraphExec";
type Int64Type = "CUdeviceptr" | "size_t" | "cuuint64_t" | "unsigned long long";

/** The JS value koffi accepts for a cuda.h parameter type. */
export type JsArgOf<C extends string> = C extends "const char *"
  ? string
  : C extends `${string}*`
    ? ArrayBufferView | bigint | null
    : C extends HandleType
      ? bigint | null
      : C extends Int64Type
        ? bigint | number
        : number;

type JsArgsOf<A extends readonly string[]> = { -readonly [I in keyof A]: JsArgOf<A[I]> };

/** The callable koffi makes from one table entry; every driver function returns a CUresult. */
export type DriverFunction<S extends DriverSymbol> = (...args: JsArgsOf<(typeof bindings)[S][1]>) => number;

/** The loaded driver: one function per table entry; optional symbols may be missing. */
export type DriverApi = { readonly [S in Exclude<DriverSymbol, OptionalDriverSymbol>]: DriverFunction<S> } & {
  readonly [S in OptionalDriverSymbol]?: DriverFunction<S>;
};

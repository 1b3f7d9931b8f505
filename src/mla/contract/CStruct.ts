/**
 * Mirrors a C struct from kernels/mla/params.h: natural alignment, fields in declaration order.
 * `pack()` writes the bytes a kernel receives as its `__grid_constant__` parameter, and
 * `checkLayout()` compares the computed offsets with the `{sizeof, offsetof...}` table the cubin exports,
 * so a drift between params.h and this mirror fails at module load instead of corrupting a launch.
 */
export type CFieldKind = "tmap" | "ptr" | "i64" | "i32" | "f32";

const KIND_SIZE: Record<CFieldKind, number> = { tmap: 128, ptr: 8, i64: 8, i32: 4, f32: 4 };
const KIND_ALIGN: Record<CFieldKind, number> = { tmap: 128, ptr: 8, i64: 8, i32: 4, f32: 4 };

export type CFieldValue = number | bigint | Uint8Array;

export class CStruct<Name extends string> {
  readonly size: number;
  readonly align: number;
  readonly offsets: Readonly<Record<Name, number>>;

  constructor(
    readonly structName: string,
    readonly fields: ReadonlyArray<readonly [Name, CFieldKind]>,
    /** Explicit alignment of the struct (alignas), if larger than its fields'. */
    alignAs = 1,
  ) {
    let off = 0;
    let align = alignAs;
    const offsets = {} as Record<Name, number>;
    for (const [name, kind] of fields) {
      const a = KIND_ALIGN[kind];
      align = Math.max(align, a);
      off = Math.ceil(off / a) * a;
      offsets[name] = off;
      off += KIND_SIZE[kind];
    }
    this.align = align;
    this.size = Math.ceil(off / align) * align;
    this.offsets = offsets;
  }

  /** Packs every field (all are required) into a fresh byte array of `size` bytes. */
  pack(values: Readonly<Record<Name, CFieldValue>>): Uint8Array {
    const bytes = new Uint8Array(this.size);
    const view = new DataView(bytes.buffer);
    for (const [name, kind] of this.fields) {
      const v = values[name];
      const off = this.offsets[name];
      if (v === undefined) throw new Error(`${this.structName}: field '${name}' has no value`);
      switch (kind) {
        case "tmap":
          if (!(v instanceof Uint8Array) || v.length !== 128) throw new Error(`${this.structName}.${name}: expected 128 tensor-map bytes`);
          bytes.set(v, off);
          break;
        case "ptr":
        case "i64":
          view.setBigInt64(off, BigInt(v as number | bigint), true);
          break;
        case "i32":
          if (typeof v !== "number" || !Number.isInteger(v) || v < -(2 ** 31) || v >= 2 ** 31) {
            throw new Error(`${this.structName}.${name}: ${String(v)} is not an int32`);
          }
          view.setInt32(off, v, true);
          break;
        case "f32":
          view.setFloat32(off, Number(v), true);
          break;
        default:
          kind satisfies never;
      }
    }
    return bytes;
  }

  /** Throws when the device's `{sizeof, offsetof...}` table disagrees with this mirror. */
  checkLayout(deviceTable: Int32Array): void {
    // Padding fields exist only to make the size explicit; the device table lists the named fields.
    const named = this.fields.filter(([n]) => !n.startsWith("pad"));
    const expected = [this.size, ...named.map(([n]) => this.offsets[n])];
    const got = Array.from(deviceTable.subarray(0, expected.length));
    const names = ["sizeof", ...named.map(([n]) => n)];
    const bad = expected.findIndex((e, i) => got[i] !== e);
    if (bad >= 0 || deviceTable.length < expected.length) {
      throw new Error(
        `${this.structName}: host/device layout mismatch at ${names[bad] ?? "length"}: host ${expected[bad]}, device ${got[bad]} ` +
          `(kernels/mla/params.h and src/mla/contract/params.ts must change together; rebuild with npm run build:kernels)`,
      );
    }
  }
}

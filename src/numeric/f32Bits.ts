// One scratch word shared by every conversion: Float32Array and Uint32Array views of the same 4 bytes
// use the same byte order, so reading bits back this way is endian-independent and allocates nothing.
const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

/** The IEEE binary32 bit pattern of `x` after rounding it to f32 (Math.fround), as an unsigned 32-bit integer. */
export function f32Bits(x: number): number {
  scratchF32[0] = x;
  return scratchU32[0];
}

/** The f32 value whose bit pattern is `bits` (taken modulo 2^32). */
export function f32FromBits(bits: number): number {
  scratchU32[0] = bits;
  return scratchF32[0];
}

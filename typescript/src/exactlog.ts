/**
 * The natural logarithm rounded correctly to the nearest double.
 *
 * BM25's IDF is `ln(1 + (N - df + 0.5) / (df + 0.5))`. Python's `math.log` is the C library's,
 * which on glibc is correctly rounded in all but vanishingly rare cases; V8's `Math.log` is an
 * fdlibm port whose result is off by one unit in the last place for a few arguments in a
 * hundred, enough to make a BM25 score differ in its last bit. This computes the logarithm in
 * 128-bit fixed point (the atanh series) and rounds once; results are cached per argument, so
 * a query pays for each of its terms' IDF once.
 */
const P = 128n;
const ONE = 1n << P;

function atanhSeries(s: bigint): bigint {
  // Σ s^(2j+1) / (2j+1), s in fixed point (|s| < 1); odd in s, so computed for |s|.
  if (s < 0n) return -atanhSeries(-s);
  const s2 = (s * s) >> P;
  let term = s;
  let sum = 0n;
  for (let j = 1n; term !== 0n; j += 2n) {
    sum += term / j;
    term = (term * s2) >> P;
  }
  return sum;
}

// ln 2 = 2·atanh(1/3)
const LN2 = 2n * atanhSeries(ONE / 3n);
const SQRT2 = 6369051672525772n; // ⌊√2 · 2^52⌋, compared with the mantissa scaled to 2^52

const view = new DataView(new ArrayBuffer(8));

function toDouble(value: bigint): number {
  const negative = value < 0n;
  const a = negative ? -value : value;
  const bits = a.toString(2).length;
  let out: number;
  if (bits <= 53) {
    out = Number(a) * 2 ** -Number(P);
  } else {
    const shift = BigInt(bits - 53);
    let top = a >> shift;
    const rest = a & ((1n << shift) - 1n);
    const half = 1n << (shift - 1n);
    if (rest > half || (rest === half && (top & 1n) === 1n)) top += 1n;
    out = Number(top) * 2 ** (Number(shift) - Number(P));
  }
  return negative ? -out : out;
}

const cache = new Map<number, number>();

/** `ln(x)`, correctly rounded, for a positive finite `x` (other values: `Math.log`'s answer). */
export function exactLog(x: number): number {
  if (!(x > 0) || !Number.isFinite(x)) return Math.log(x);
  if (x === 1) return 0;
  const known = cache.get(x);
  if (known !== undefined) return known;
  view.setFloat64(0, x);
  const hi = view.getUint32(0);
  const lo = view.getUint32(4);
  const biased = (hi >>> 20) & 0x7ff;
  let mantissa = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let exponent: number;
  if (biased === 0) {
    // subnormal: normalise the mantissa to 53 bits
    const bits = mantissa.toString(2).length;
    mantissa <<= BigInt(53 - bits);
    exponent = -1074 + bits - 53;
  } else {
    mantissa |= 1n << 52n;
    exponent = biased - 1075;
  }
  // x = m · 2^k with m = mantissa / 2^52 in [1, 2); centre m on 1 for a faster series.
  let k = exponent + 52;
  let m = mantissa << (P - 52n);
  if (mantissa > SQRT2) {
    m >>= 1n;
    k += 1;
  }
  const s = ((m - ONE) << P) / (m + ONE);
  const result = toDouble(BigInt(k) * LN2 + 2n * atanhSeries(s));
  if (cache.size > 100_000) cache.clear();
  cache.set(x, result);
  return result;
}

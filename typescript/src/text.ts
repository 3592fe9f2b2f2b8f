/**
 * Token counts and the JSON text of tool results, as Python computes them.
 *
 * Python's `len()` counts code points and JavaScript's `length` UTF-16 code units, so a
 * character outside the Basic Multilingual Plane (an emoji) is one in Python and two here:
 * {@link codePointLength} counts as Python does. A turn's tool results count as the text of
 * Python's `json.dumps` (ASCII only, `", "` and `": "` separators, floats as Python's `repr`),
 * which {@link pythonJsonDumps} reproduces.
 */
import { ValidationError } from "./errors.js";

/** Counts the tokens `text` takes in the caller's model. */
export type TokenCounter = (text: string) => number;

// The characters Python's str.strip() and str.isspace() take for whitespace (JavaScript's trim()
// differs: it keeps U+001C..U+001F and U+0085, and strips U+FEFF).
const PY_SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const PY_STRIP = new RegExp(`^[${PY_SPACE}]+|[${PY_SPACE}]+$`, "g");

/** Python's `str.strip()`. */
export function pyStrip(text: string): string {
  return text.replace(PY_STRIP, "");
}

/** The number of code points of `text` (Python's `len`). */
export function codePointLength(text: string): number {
  let n = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/** `ceil(len(text) / 4)` in code points: about four characters a token for English text. */
export function heuristicTokenCount(text: string): number {
  return Math.ceil(codePointLength(text) / 4);
}

/** Python's `repr(float)`: the shortest digits that round-trip, in Python's notation. */
export function pythonFloatRepr(x: number): string {
  if (Number.isNaN(x)) return "NaN";
  if (x === Infinity) return "Infinity";
  if (x === -Infinity) return "-Infinity";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  // toExponential() without digits gives the shortest digits that round-trip.
  const [mantissa, exp] = x.toExponential().split("e") as [string, string];
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace("-", "").replace(".", "");
  const e = Number(exp);
  const sign = negative ? "-" : "";
  if (e < -4 || e >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${m}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  }
  if (e < 0) return `${sign}0.${"0".repeat(-e - 1)}${digits}`;
  if (digits.length <= e + 1) return `${sign}${digits}${"0".repeat(e + 1 - digits.length)}.0`;
  return `${sign}${digits.slice(0, e + 1)}.${digits.slice(e + 1)}`;
}

const SHORT_ESCAPES: Record<string, string> = {
  '"': '\\"',
  "\\": "\\\\",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
  "\b": "\\b",
  "\f": "\\f",
};

function pythonString(s: string): string {
  // ensure_ascii: everything outside ' '..'~' is escaped, UTF-16 units as \uXXXX.
  return (
    '"' +
    s.replace(/[^ -~]|["\\]/g, (c) => SHORT_ESCAPES[c] ?? "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")) +
    '"'
  );
}

const INT64_LIMIT = 2 ** 63;

/**
 * `json.dumps(value)` as Python writes it. A number that is a whole number within a signed
 * 64-bit integer is written as an integer (JavaScript cannot tell `1` from `1.0`; JSON read by
 * Python gives an int for `1`); other numbers as Python's float `repr`.
 */
export function pythonJsonDumps(value: unknown): string {
  if (value === null) return "null";
  if (value === true) return "true";
  if (value === false) return "false";
  if (typeof value === "string") return pythonString(value);
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number") {
    if (Number.isInteger(value) && Math.abs(value) < INT64_LIMIT && !Object.is(value, -0)) {
      return BigInt(value).toString();
    }
    return pythonFloatRepr(value);
  }
  if (Array.isArray(value)) return "[" + value.map(pythonJsonDumps).join(", ") + "]";
  if (typeof value === "object") {
    const parts = Object.entries(value as Record<string, unknown>).map(([k, v]) => `${pythonString(k)}: ${pythonJsonDumps(v)}`);
    return "{" + parts.join(", ") + "}";
  }
  throw new ValidationError(`cannot serialise a ${typeof value} as JSON`);
}

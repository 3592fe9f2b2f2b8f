/**
 * Token-budget packing, without I/O (Python's `actrone_pg.budget`).
 *
 * The budget is split into fixed shares: `floor(0.35 × budget)` for recent turns (L1) and
 * `floor(0.25 × budget)` for memories (L2), each computed exactly in decimal as Python does
 * (`Decimal(repr(fraction)) × budget`): 0.29 × 100 is 29, not 28.999…. A share left unused is
 * never handed to the other.
 */

/** The L1 and L2 shares of a budget, in tokens. */
export interface Shares {
  readonly session: number;
  readonly episodic: number;
}

/** `floor(fraction × budget)` computed exactly on the shortest decimal of `fraction`. */
export function share(budget: number, fraction: number): number {
  // String(x) gives the shortest digits that round-trip, as Python's repr does.
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/.exec(String(fraction));
  if (m === null) throw new RangeError(`not a finite number: ${fraction}`);
  const [, sign = "", whole = "0", frac = "", exp = "0"] = m;
  const digits = BigInt(sign + whole + frac);
  const scale = frac.length - Number(exp); // value = digits × 10^-scale
  const product = digits * BigInt(budget);
  if (scale <= 0) return Number(product * 10n ** BigInt(-scale));
  const divisor = 10n ** BigInt(scale);
  let q = product / divisor;
  if (product % divisor !== 0n && product < 0n) q -= 1n; // floor, not truncation
  return Number(q);
}

const splits = new Map<string, Shares>();

/** The two shares of `budget` (each floored, computed exactly). */
export function splitBudget(budget: number, sessionFraction: number, episodicFraction: number): Shares {
  const key = `${budget}/${sessionFraction}/${episodicFraction}`;
  let found = splits.get(key);
  if (found === undefined) {
    found = { session: share(budget, sessionFraction), episodic: share(budget, episodicFraction) };
    if (splits.size > 256) splits.clear();
    splits.set(key, found);
  }
  return found;
}

/**
 * Take turns newest first until the first that does not fit; return them oldest first. A
 * conversation has no holes: once a turn is left out, every older one is too.
 */
export function packTurns<T>(newestFirst: readonly T[], cost: (item: T) => number, limit: number): [T[], number] {
  const taken: T[] = [];
  let used = 0;
  for (const item of newestFirst) {
    const c = cost(item);
    if (used + c > limit) break;
    taken.push(item);
    used += c;
  }
  taken.reverse();
  return [taken, used];
}

/**
 * Take items in rank order, skipping any that does not fit and trying the next; returns the
 * positions taken and their total. `limit` null takes every item; `maxItems` stops after that
 * many are taken.
 */
export function packCosts(costs: readonly number[], limit: number | null, maxItems: number | null = null): [number[], number] {
  if (limit === null) {
    const n = maxItems === null ? costs.length : Math.min(maxItems, costs.length);
    const taken = Array.from({ length: n }, (_, i) => i);
    return [taken, taken.reduce((s, i) => s + costs[i]!, 0)];
  }
  let cheapest = 0;
  if (costs.length > 0) cheapest = costs.reduce((a, b) => Math.min(a, b));
  const taken: number[] = [];
  let used = 0;
  for (let i = 0; i < costs.length; i++) {
    if (used + cheapest > limit || taken.length === maxItems) break;
    const c = costs[i]!;
    if (used + c <= limit) {
      taken.push(i);
      used += c;
    }
  }
  return [taken, used];
}

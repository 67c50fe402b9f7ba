/**
 * A small seeded pseudo-random generator (mulberry32), so a test that draws at random can be
 * replayed from its seed: the same seed gives the same sequence of draws on every machine.
 */

/** A generator of numbers in [0, 1), fixed by `seed`. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Draws over one seeded generator: integers, picks, weighted choices. */
export class SeededRandom {
  readonly #next: () => number;

  constructor(seed: number) {
    this.#next = mulberry32(seed);
  }

  /** A number in [0, 1). */
  fraction(): number {
    return this.#next();
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.#next() * (max - min + 1));
  }

  chance(probability: number): boolean {
    return this.#next() < probability;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[Math.floor(this.#next() * items.length)] as T;
  }

  /** One of the keys, each drawn in proportion to its weight (weights ≤ 0 are never drawn). */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const entries = (Object.entries(weights) as Array<[K, number]>).filter(([, w]) => w > 0);
    const total = entries.reduce((sum, [, w]) => sum + w, 0);
    let draw = this.#next() * total;
    for (const [key, w] of entries) {
      draw -= w;
      if (draw < 0) return key;
    }
    return (entries[entries.length - 1] as [K, number])[0];
  }
}

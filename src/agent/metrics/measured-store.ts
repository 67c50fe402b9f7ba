/**
 * A Store that tells telemetry about every commit — how long it took and how it ended — and about
 * every address it allocated. It wraps another store and changes nothing else: the one place all
 * writes pass, so no caller can allocate without being counted.
 */
import type { Allocation } from '../../ipam/allocation.ts';
import { ForwardingStore } from '../../store/forwarding-store.ts';
import type { CommitResult, Store } from '../../store/store.ts';
import type { Telemetry } from './telemetry.ts';

export class MeasuredStore extends ForwardingStore {
  readonly #telemetry: Telemetry;

  constructor(inner: Store, telemetry: Telemetry) {
    super(inner);
    this.#telemetry = telemetry;
  }

  override async commit(...args: Parameters<Store['commit']>): Promise<CommitResult> {
    const ops = args[2];
    const started = performance.now();
    let result: CommitResult;
    try {
      result = await this.inner.commit(...args);
    } catch (error) {
      this.#telemetry.commit((performance.now() - started) / 1000, 'error');
      throw error;
    }
    this.#telemetry.commit((performance.now() - started) / 1000, result.kind);
    if (result.kind === 'committed') {
      const allocated: Allocation[] = [];
      for (const op of ops) if (op.op === 'allocate') allocated.push(op.allocation);
      if (allocated.length > 0) this.#telemetry.allocated(allocated);
    }
    return result;
  }
}

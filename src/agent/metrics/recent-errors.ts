/**
 * The agent's recent background failures (journal watch, reconcile passes, cluster chores), kept
 * for `warren status`: the last few, newest last, each logged as it happens. Bounded, so a
 * failure repeating every tick never grows it.
 */
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.ts';

export interface RecentError {
  readonly at: string;
  readonly message: string;
}

export class RecentErrors {
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #max: number;
  #errors: RecentError[] = [];

  constructor(clock: Clock, logger: Logger, max = 20) {
    this.#clock = clock;
    this.#logger = logger;
    this.#max = max;
  }

  add(message: string): void {
    this.#errors = [...this.#errors, { at: new Date(this.#clock.now()).toISOString(), message }].slice(-this.#max);
    this.#logger.error(message);
  }

  list(): readonly RecentError[] {
    return this.#errors;
  }
}

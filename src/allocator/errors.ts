/**
 * The allocator's own refusals: a state of the pool, not a mistake in the request. Their CNI codes
 * are Warren's (100+, cni/errors.ts); their HTTP status is 409 (api/errors.ts).
 */
export const ALLOCATOR_ERROR_CODES = [
  /** The pool has no free address left. */
  'POOL_EXHAUSTED',
  /** A requested address cannot be had: taken, outside the allocatable span, excluded, or a second one in a range. */
  'ADDRESS_UNAVAILABLE',
] as const;
export type AllocatorErrorCode = (typeof ALLOCATOR_ERROR_CODES)[number];

/**
 * `--json` output writes every timestamp as RFC 3339 (UTC, milliseconds): the API's milliseconds
 * since the epoch in a field named like a moment (`createdAt`, `retryAt`) become text, moments that
 * are text already stay as they are, and nothing else that is a number changes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { jsonText } from '../../src/cli/format.ts';

describe('--json timestamps', () => {
  it('writes epoch milliseconds of a moment field as RFC 3339 and leaves every other number', () => {
    const out = JSON.parse(
      jsonText({
        createdAt: Date.UTC(2026, 10, 27, 5, 14, 10, 123),
        queue: [{ retryAt: 0, failures: 3 }],
        at: '2026-11-27T05:14:10.123Z',
        capacity: 1_700_000_000_000,
        format: 1,
      }),
    );
    assert.deepEqual(out, {
      createdAt: '2026-11-27T05:14:10.123Z',
      queue: [{ retryAt: '1970-01-01T00:00:00.000Z', failures: 3 }],
      at: '2026-11-27T05:14:10.123Z',
      capacity: 1_700_000_000_000,
      format: 1,
    });
  });

  it('round-trips any moment a Date can hold', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 8.64e15 - 1 }), (ms) => {
        const { createdAt } = JSON.parse(jsonText({ createdAt: ms })) as { createdAt: string };
        assert.match(createdAt, /^[+-]?\d{4,6}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
        assert.equal(Date.parse(createdAt), ms);
      }),
    );
  });
});

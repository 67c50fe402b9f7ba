/**
 * The soak's judgement of a publication deleted by hand and not written again (republish.ts): only
 * an owner whose agent ran the whole bound, with no recovery standing, is held to it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { REPUBLISH_BOUND_MS, unwrittenExcuse } from './republish.ts';

describe('a publication deleted by hand, not written again within the bound', () => {
  it('is no violation when its agent was down for part of the wait (the etcd soak, seed 3943, step 1488)', () => {
    // Killed three steps before the deletion, started again two steps after: its announcement stood.
    assert.match(unwrittenExcuse({ ranMs: 0 }) ?? '', /agent was down/);
    assert.match(unwrittenExcuse({ ranMs: REPUBLISH_BOUND_MS - 1 }) ?? '', /agent was down/);
  });

  it('is no violation while the store is in recovery', () => {
    assert.match(unwrittenExcuse({ ranMs: REPUBLISH_BOUND_MS, stood: 'etcd is in recovery' }) ?? '', /in recovery/);
  });

  it('is a violation when its agent ran the whole bound and no recovery stands', () => {
    assert.equal(unwrittenExcuse({ ranMs: REPUBLISH_BOUND_MS }), undefined);
  });
});

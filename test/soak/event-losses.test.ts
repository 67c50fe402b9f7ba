/**
 * The spans that take a release Event away on the kubernetes store's soak (event-losses.ts): the
 * API server away (closed, or open while it still is), a restore back to a snapshot (what was
 * written since), every connection cut (an instant); a span before the Event, or after it, is not.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { EventLosses } from './event-losses.ts';

describe('what takes a release Event away', () => {
  it('puts an Event down to the API server away, from its stop to its start, and while it still is', () => {
    const losses = new EventLosses();
    losses.away(100);
    losses.back(200);
    assert.equal(losses.lostBy(150, 160), 'the API server away');
    assert.equal(losses.lostBy(50, 100), 'the API server away', 'sent as it stopped');
    assert.equal(losses.lostBy(201, 300), undefined, 'sent after its start');
    assert.equal(losses.lostBy(10, 99), undefined, 'sent before its stop');
    losses.away(400);
    assert.equal(losses.lostBy(500, 600), 'the API server away', 'not started again yet');
    assert.equal(losses.lostBy(300, 399), undefined);
  });

  it('puts an Event written after the snapshot a restore went back to down to the restore, and none before it or after', () => {
    const losses = new EventLosses();
    losses.snapshot(1_000);
    assert.equal(losses.lostBy(1_100, 1_200), undefined, 'no restore yet');
    losses.restored(2_000);
    assert.equal(losses.lostBy(1_100, 1_200), 'the API server restored from an older snapshot');
    assert.equal(losses.lostBy(500, 900), undefined, 'in the snapshot');
    assert.equal(losses.lostBy(2_001, 2_500), undefined, 'written after the restore');
    losses.restored(3_000);
    assert.equal(losses.lostBy(2_001, 2_500), undefined, 'a restore with no snapshot kept takes nothing');
  });

  it('puts an Event in flight when every connection was cut down to the cut', () => {
    const losses = new EventLosses();
    losses.cut(700);
    assert.equal(losses.lostBy(600, 800), 'its connections cut');
    assert.equal(losses.lostBy(701, 800), undefined);
  });
});

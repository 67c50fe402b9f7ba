/**
 * The check a store's continuity hands out (src/store/tiered/continuity.ts StoreCheck): what a check
 * begun before the operator's accept concludes is dropped, and said at debug; one begun after it
 * counts. Pure, no store.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StoreContinuity } from '../../../src/store/tiered/continuity.ts';

/** A continuity whose debug lines are kept, and one revision seen (its floor). */
function seen(revision: number): { continuity: StoreContinuity; debug: string[] } {
  const debug: string[] = [];
  const continuity = new (class extends StoreContinuity {
    constructor() {
      super(
        () => 3,
        (message) => debug.push(message),
      );
      this.raise(revision);
    }
  })();
  return { continuity, debug };
}

describe('StoreCheck', () => {
  it('a halt through a check begun before the operator accepted the store is dropped, and said at debug', () => {
    const { continuity, debug } = seen(40);
    const before = continuity.begin();
    assert.equal(before.floor, 40);
    assert.equal(before.outdated, false);
    continuity.accept();
    assert.equal(before.outdated, true);
    before.halt('store-lost', 'the identity read from the old store is gone');
    assert.equal(continuity.halted(), undefined, 'the accepted store stands');
    assert.equal(debug.length, 1);
    assert.match(debug[0] ?? '', /before the operator accepted the store.*not halted \(store-lost\).*identity read/);
  });

  it('a halt through a check begun after the accept halts', () => {
    const { continuity, debug } = seen(40);
    continuity.accept();
    const after = continuity.begin();
    assert.equal(after.floor, 0, 'the floor was forgotten with the old store');
    after.halt('store-lost', 'went backwards');
    assert.deepEqual(continuity.halted(), { kind: 'store-lost', message: 'went backwards', at: 3 });
    assert.deepEqual(debug, []);
  });

  it('an outdated check records no identity and judges no answer; a current one does both', () => {
    const { continuity, debug } = seen(7);
    const before = continuity.begin();
    continuity.accept();
    const judged: number[] = [];
    before.verified('id-old');
    before.observe('list blocks', (floor) => judged.push(floor));
    assert.equal(continuity.identity, undefined);
    assert.equal(judged.length, 0, 'the old floor judges nothing after the accept');
    assert.equal(debug.length, 2);
    assert.match(debug[1] ?? '', /"list blocks" not judged/);
    const after = continuity.begin();
    after.verified('id-new');
    after.observe('list blocks', (floor) => judged.push(floor));
    assert.equal(continuity.identity, 'id-new');
    assert.deepEqual(judged, [0], 'a current check judges against the floor seen since the accept');
  });
});

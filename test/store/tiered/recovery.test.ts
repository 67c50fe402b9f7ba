/**
 * The recovery marker's bookkeeping (src/store/tiered/recovery.ts) and the kubernetes store's judgement of
 * resourceVersions (src/store/kubernetes/continuity.ts): pure, no store.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isWarrenError } from '../../../src/core/errors.ts';
import { KubeContinuity } from '../../../src/store/kubernetes/continuity.ts';
import type { Halt } from '../../../src/store/tiered/continuity.ts';
import {
  type Recovery,
  RecoveryJoin,
  joined,
  left,
  recoveryOf,
  recoveryProblem,
} from '../../../src/store/tiered/recovery.ts';

describe('the recovery marker', () => {
  it('is made by the first node that joins, keeps its reason, and goes when the last node leaves', () => {
    const first = joined(undefined, ['n2', 'n1', 'n2'], 'went backwards', 1000);
    assert.deepEqual(first, { since: 1000, reason: 'went backwards', pending: ['n1', 'n2'] });
    const more = joined(first, ['n3'], 'another reason', 2000);
    assert.deepEqual(more, { since: 1000, reason: 'went backwards', pending: ['n1', 'n2', 'n3'] });
    assert.match(recoveryProblem(more), /in recovery .*waiting for n1, n2, n3/);
    const fewer = left(left(more, 'n1') ?? more, 'n3');
    assert.deepEqual(fewer?.pending, ['n2']);
    assert.equal(left(fewer ?? more, 'n2'), undefined, 'the last one to leave removes it');
  });

  it('reads as undefined when it is not what Warren writes', () => {
    assert.equal(recoveryOf({ since: 'x', reason: 'r', pending: [] }), undefined);
    assert.deepEqual(recoveryOf({ since: 1, reason: 'r', pending: ['b', 7, 'a'] })?.pending, ['a', 'b']);
  });
});

/** A RecoveryJoin on a store that names n1 and n3 as holding blocks, and the nodes it wrote last. */
function joiner(): { readonly join: RecoveryJoin; written: string[] | undefined } {
  const j: { join: RecoveryJoin; written: string[] | undefined } = {
    join: new RecoveryJoin(
      async () => ['n1', 'n3'],
      async (nodes) => {
        j.written = [...nodes];
      },
    ),
    written: undefined,
  };
  return j;
}

/** What `j` writes for node n2 with `recovery` standing: the nodes it joins, undefined for nothing. */
async function joins(
  o: { halt?: Halt; taken?: string; recovery?: Recovery },
  j = joiner(),
): Promise<string[] | undefined> {
  j.written = undefined;
  await j.join.keep({ halt: o.halt, taken: o.taken, node: 'n2', recovery: o.recovery });
  return j.written;
}

describe('a node joining the recovery marker (RecoveryJoin)', () => {
  const lost: Halt = { kind: 'store-lost', message: 'etcd went backwards. Allocation is stopped until ...', at: 1 };
  const old: Recovery = { since: 1, reason: 'an earlier loss', pending: ['n1'] };

  it('puts every node the store names on a marker a restore brought back from an earlier recovery', async () => {
    // Found by the soak (etcd seed 3943, step 1547): the restored snapshot held the marker of an
    // earlier recovery; the nodes that noticed added only themselves, the node that was down during
    // the restore was never waited for, and another handed out its containers' addresses.
    assert.deepEqual(await joins({ halt: lost, recovery: old }), ['n2', 'n1', 'n3']);
    assert.deepEqual(await joins({ halt: lost }), ['n2', 'n1', 'n3'], 'the first marker, as before');
    // The stale marker lists this node already: it joins all the same, once for its halt.
    const join = joiner();
    const listed = { ...old, pending: ['n2'] };
    assert.deepEqual(await joins({ halt: lost, recovery: listed }, join), ['n2', 'n1', 'n3']);
    assert.equal(await joins({ halt: lost, recovery: listed }, join), undefined, 'once for its halt');
    assert.deepEqual(await joins({ halt: lost, recovery: old }, join), ['n2', 'n1', 'n3'], 'taken off: again');
    const again: Halt = { ...lost, at: 2 }; // accepted, and halted again
    assert.deepEqual(await joins({ halt: again, recovery: listed }, join), ['n2', 'n1', 'n3']);
  });

  it('puts a node whose range is halted on a block another node holds on a recovery under way, and writes none', async () => {
    const taken = 'allocation in range r is halted: ... node n1 holds the block now';
    assert.deepEqual(await joins({ taken, recovery: old }), ['n2']);
    assert.equal(await joins({ taken }), undefined, "no recovery under way: the halt stays the node's own");
    assert.equal(await joins({ taken, recovery: { ...old, pending: ['n2'] } }), undefined);
    assert.equal(await joins({ recovery: old }), undefined, 'neither halted nor taken: nothing');
  });
});

describe('KubeContinuity', () => {
  it('halts on a revision lower than one seen before the request left, not on one merely overtaken', () => {
    const c = new KubeContinuity('the API server', () => 5);
    const observer = c.observer(true);
    observer.observe('100', observer.floor(), 'list blocks');
    const early = observer.floor();
    observer.observe('120', observer.floor(), 'claim');
    observer.observe('110', early, 'a listing sent before the claim answered'); // legitimate
    observer.observe('not-a-number', observer.floor(), 'opaque'); // never compared
    assert.equal(c.halted(), undefined);
    observer.beforeWrite('claim');
    observer.observe('40', observer.floor(), 'renew the node announcement');
    assert.match(c.halted()?.message ?? '', /resourceVersion 40, lower than 120 .*went backwards.*store accept/);
    assert.throws(
      () => observer.beforeWrite('claim'),
      (e) => isWarrenError(e, 'TRY_AGAIN'),
    );
    c.observer(false).beforeWrite('write the recovery marker'); // the marker still goes out
    c.accept();
    assert.equal(c.halted(), undefined);
    c.observer(true).observe('41', c.observer(true).floor(), 'after accept');
    assert.equal(c.halted(), undefined, 'after accept, the store as it is now is the one');
  });

  it('an answer to a request sent before the operator accepted the store, answered after, does not halt it again', () => {
    const c = new KubeContinuity('API server test');
    const observer = c.observer(true);
    observer.observe('500', observer.floor(), 'claim');
    const sentBefore = observer.floor(); // a listing leaves; the store is wiped and halts meanwhile
    observer.observe('3', observer.floor(), 'renew the node announcement');
    assert.ok(c.halted());
    c.accept();
    observer.observe('4', sentBefore, 'the listing sent before the accept');
    assert.equal(c.halted(), undefined, 'the accepted store stands');
    observer.observe('5', observer.floor(), 'a read after the accept');
    assert.equal(c.floor(), 5, 'answers to requests sent after the accept count');
  });
});

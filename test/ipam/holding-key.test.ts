/**
 * The holding codecs (src/ipam/holding-key.ts): holder keys round-trip and refuse what is none; use
 * pool keys name their range, address and holder, and are never taken for a block or a loan ledger
 * of their range; a placeholder is shown as held for its holder.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bookkeepingLabel } from '../../src/ipam/bookkeeping.ts';
import { blockOfKey, isBlockKey, rangePoolOfKey } from '../../src/ipam/blocks.ts';
import {
  type Holder,
  holderKey,
  holderKeyProblem,
  isUseKey,
  parseHolderKey,
  useKey,
  useLedgerOf,
} from '../../src/ipam/holding-key.ts';
import { isLoanKey } from '../../src/ipam/loan-key.ts';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';

describe('holder keys', () => {
  it('round-trip for StatefulSet ordinals and IPAMClaims', () => {
    const holders: Holder[] = [
      { kind: 'statefulset', namespace: 'db', name: 'web', ordinal: 0 },
      { kind: 'statefulset', namespace: 'a.b', name: 'x-1', ordinal: 123 },
      { kind: 'ipamclaim', namespace: 'vms', name: 'vm-a.net1' },
    ];
    for (const h of holders) assert.deepEqual(parseHolderKey(holderKey(h)), h);
    assert.equal(holderKey(holders[0] as Holder), 'statefulset/db/web/0');
  });

  it('refuse what is none, naming the forms', () => {
    for (const key of [
      'deployment/db/web',
      'statefulset/db/web',
      'statefulset/db/web/01',
      'ipamclaim/DB/x',
      '',
      'ipamclaim/a/b/c',
    ])
      assert.match(holderKeyProblem(key) ?? '', /is not a holding key/, key);
  });
});

describe('use ledger keys', () => {
  const [range] = parseIpamConfig({ type: 'warren', range: '10.0.0.0/24', block_size: 28 }).ranges;
  it('name their range, address and holder, for IPv4 and IPv6', () => {
    for (const [pool, address] of [
      ['10.0.0.0/24@net', '10.0.0.5'],
      ['fd00::/64', 'fd00::5'],
    ] as const) {
      const key = useKey(pool, address, 'statefulset/db/web/3');
      assert.ok(isUseKey(key));
      assert.equal(rangePoolOfKey(key), pool, 'counted with its range (one address per owner and range)');
      assert.deepEqual(useLedgerOf(key), { rangePool: pool, address, holder: 'statefulset/db/web/3' });
    }
  });

  it('are never a block nor a loan ledger of their range', () => {
    assert.ok(range);
    const key = useKey(range.pool, '10.0.0.5', 'ipamclaim/vms/vm-a');
    assert.ok(isBlockKey(key), 'a key of its range (after #)');
    assert.equal(blockOfKey(range, key), undefined);
    assert.equal(isLoanKey(key, 28), false);
    assert.equal(isUseKey(`${range.pool}#10.0.0.5/32`), false, 'a loan ledger is no use ledger');
    assert.equal(useLedgerOf(`${range.pool}#held:nonsense/statefulset/db/web/0`), undefined);
  });

  it('placeholders are shown as held for their holder', () => {
    assert.equal(
      bookkeepingLabel({ network: 'warren.dev/held', containerID: 'ipamclaim/vms/vm-a' }),
      'held: ipamclaim/vms/vm-a',
    );
  });
});

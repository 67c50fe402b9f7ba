/**
 * What follows a claim's life, on a manual clock: its status written after an ADD (once, retried
 * with backoff, never for a claim that says it already), and its holding ended when it is deleted
 * — by the node keeping the placeholder only, including deletions missed while the agent was away.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClaimCache, type ClaimRef } from '../../../../src/agent/kubernetes/ipam-claims/claim-cache.ts';
import {
  ClaimStatusWriter,
  type WantedClaimStatus,
} from '../../../../src/agent/kubernetes/ipam-claims/claim-status.ts';
import { type ClaimHoldings, ClaimUpkeep } from '../../../../src/agent/kubernetes/ipam-claims/claim-upkeep.ts';
import { claimExists } from '../../../../src/agent/kubernetes/ipam-claims/ipam-claims.ts';
import { AsyncChannel } from '../../../../src/core/async-channel.ts';
import { WarrenError } from '../../../../src/core/errors.ts';
import { ManualClock } from '../../../../src/core/clock.ts';
import type { ListWatchItem } from '../../../../src/sources/kubernetes/list-watch.ts';
import { flush } from '../../../helpers/event-loop.ts';
import { silentLogger } from '../../../helpers/logger.ts';

function claim(name: string, status?: WantedClaimStatus) {
  return {
    metadata: { name, namespace: 'vms', uid: `uid-${name}`, resourceVersion: '1' },
    spec: { network: 'tenant-a' },
    ...(status === undefined ? {} : { status }),
  };
}

describe('ClaimStatusWriter', () => {
  function setup(failures = 0) {
    const clock = new ManualClock();
    const cache = new ClaimCache({ fetchClaim: async () => undefined });
    const patches: Array<{ ref: ClaimRef; status: WantedClaimStatus }> = [];
    let failing = failures;
    const writer = new ClaimStatusWriter({
      peek: (ref) => cache.peek(ref),
      patchStatus: async (ref, status) => {
        if (failing-- > 0) throw new Error('API server away (injected)');
        patches.push({ ref, status });
        return 'patched';
      },
      clock,
      logger: silentLogger,
    });
    const stop = new AbortController();
    const running = writer.run(stop.signal);
    return { clock, cache, patches, writer, stop, running };
  }

  it('writes status.ips and ownerPod once, and nothing when the claim says it already', async () => {
    const s = setup();
    s.cache.observe({ kind: 'listed', objects: [claim('vm1.a', { ips: ['10.77.0.5/24'], ownerPod: 'launcher-1' })] });
    const ref = { namespace: 'vms', name: 'vm1.a' };
    s.writer.want(ref, { ips: ['10.77.0.5/24'], ownerPod: 'launcher-1' });
    await flush(3);
    assert.deepEqual(s.patches, []);
    s.writer.want(ref, { ips: ['10.77.0.5/24'], ownerPod: 'launcher-2' });
    await flush(3);
    assert.deepEqual(s.patches, [{ ref, status: { ips: ['10.77.0.5/24'], ownerPod: 'launcher-2' } }]);
    assert.equal(s.writer.stats().pending, 0);
    s.stop.abort();
    await s.running;
  });

  it('retries a failed write with backoff on the clock', async () => {
    const s = setup(2);
    const ref = { namespace: 'vms', name: 'vm2.a' };
    s.writer.want(ref, { ips: ['10.77.0.6/24'], ownerPod: 'p' });
    await flush(3);
    assert.deepEqual(s.patches, []);
    for (let i = 0; i < 2; i++) {
      s.clock.advance(60_000);
      await flush(3);
    }
    assert.equal(s.patches.length, 1);
    assert.equal(s.writer.stats().written, 1);
    s.stop.abort();
    await s.running;
  });
});

describe('ClaimUpkeep', () => {
  function setup(kept: string[], existing = new Set<string>()) {
    const clock = new ManualClock();
    const cache = new ClaimCache({ fetchClaim: async () => undefined });
    const ended: string[] = [];
    const keptKeys = new Set(kept);
    const holdings: ClaimHoldings = {
      keeps: async (key) => keptKeys.has(key),
      keptClaimKeys: async () => [...keptKeys],
      endHolding: async (key) => {
        ended.push(key);
        keptKeys.delete(key);
        return [{ address: '10.77.0.5' }];
      },
    };
    const upkeep = new ClaimUpkeep({
      cache,
      exists: async (ref) => existing.has(ref.name),
      holdings,
      clock,
      logger: silentLogger,
    });
    const items = new AsyncChannel<ListWatchItem<unknown>>();
    const stop = new AbortController();
    const running = upkeep.run(items, stop.signal);
    const finish = async () => {
      stop.abort();
      items.close();
      await running;
    };
    return { cache, clock, ended, items, keptKeys, upkeep, finish };
  }

  it('ends the holding of a deleted claim kept here, and of none other', async () => {
    const s = setup(['ipamclaim/vms/vm1.a']);
    s.items.push({ kind: 'listed', objects: [claim('vm1.a'), claim('vm2.a')] });
    await flush(3);
    assert.deepEqual(s.ended, []);
    s.items.push({
      kind: 'modified',
      object: { ...claim('vm1.a'), metadata: { ...claim('vm1.a').metadata, deletionTimestamp: 'x' } },
    });
    await flush(3);
    assert.deepEqual(s.ended, [], 'marked for deletion (a finalizer holds it): kept');
    s.items.push({ kind: 'deleted', object: claim('vm2.a') });
    await flush(3);
    assert.deepEqual(s.ended, [], "another node's placeholder: not this agent's to end");
    s.items.push({ kind: 'deleted', object: claim('vm1.a') });
    await flush(5);
    assert.deepEqual(s.ended, ['ipamclaim/vms/vm1.a']);
    assert.equal(s.upkeep.stats().ended, 1);
    await s.finish();
  });

  it('finds after a listing the holdings whose claims were deleted while it was away', async () => {
    const s = setup(['ipamclaim/vms/gone.a', 'ipamclaim/vms/here.a']);
    s.items.push({ kind: 'listed', objects: [claim('here.a')] });
    await flush(5);
    assert.deepEqual(s.ended, ['ipamclaim/vms/gone.a']);
    await s.finish();
  });

  it('never ends the holding of a claim the API server has, though the listing missed it (made just after)', async () => {
    const s = setup(['ipamclaim/vms/new.a'], new Set(['new.a']));
    s.items.push({ kind: 'listed', objects: [] });
    await flush(5);
    assert.deepEqual(s.ended, []);
    await s.finish();
  });

  it('finds within one sweep a holding that came to this node after its claim was deleted', async () => {
    const s = setup([]);
    s.items.push({ kind: 'listed', objects: [] });
    await flush(3);
    s.keptKeys.add('ipamclaim/vms/orphan.a'); // the block of a node gone came here, its placeholder held again
    s.clock.advance(5 * 60_000);
    await flush(5);
    assert.deepEqual(s.ended, ['ipamclaim/vms/orphan.a']);
    await s.finish();
  });
});

describe('claimExists', () => {
  const ref = { namespace: 'vms', name: 'vm.a' };
  it('is the GET: true for a claim, false for none, false when IPAMClaims are not served at all (CRD gone)', async () => {
    assert.equal(await claimExists({ get: async () => ({ metadata: {} }) }, ref), true);
    assert.equal(await claimExists({ get: async () => undefined }, ref), false);
    const notServed = async () => {
      throw new WarrenError('INVALID_CONFIG', 'does not serve ipamclaims.k8s.cni.cncf.io');
    };
    assert.equal(await claimExists({ get: notServed }, ref), false);
  });

  it('throws what else failed: the claim may still be there', async () => {
    const away = async () => {
      throw new WarrenError('TRY_AGAIN', 'the API server is away');
    };
    await assert.rejects(claimExists({ get: away }, ref), /away/);
  });
});

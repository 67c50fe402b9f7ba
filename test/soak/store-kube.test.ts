/**
 * The kubernetes store's side of the soak, without processes: its plan's guarantees over many
 * seeds (the API server never stopped twice nor restored while stopped, a restore only from a
 * snapshot kept and always followed by the recovery procedure, the plan ending with the API server
 * up), the operator's reading of `warren status` (which node must run `warren store accept`, on the
 * agents' own wording), and the cluster audit's address arithmetic.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cidrContains } from './kube-cluster-audit.ts';
import { planSoak } from './plan.ts';
import { judgeProblem } from './store-kube.ts';
import { kubePlan } from './store-kube-plan.ts';
import type { StoreStep } from './store.ts';

describe("the kubernetes store's soak plan", () => {
  it('never stops the API server twice, restores only a kept snapshot while up, recovers every restore, ends up', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const steps = planSoak({ seed, nodes: 3, faults: 80, podsPerNode: 12, operationsPerFault: 6, store: kubePlan });
      let down = false;
      let snapshot = false;
      let recovering = false;
      for (const s of steps.filter((x): x is StoreStep => x.kind === 'store')) {
        const where = `seed ${seed}: ${s.action}`;
        switch (s.action) {
          case 'api-stop':
            assert.ok(!down && !recovering, where);
            down = true;
            break;
          case 'api-start':
            assert.ok(down, where);
            down = false;
            break;
          case 'api-snapshot':
            snapshot = true;
            break;
          case 'api-restore':
            assert.ok(snapshot && !down && !recovering, where);
            snapshot = false;
            recovering = true;
            break;
          case 'api-recover':
            assert.ok(recovering, where);
            recovering = false;
            break;
        }
      }
      assert.ok(!down && !recovering, `seed ${seed}: the plan ends with the API server up and recovered`);
    }
    const kinds = new Set(
      planSoak({ seed: 7, nodes: 3, faults: 200, podsPerNode: 12, operationsPerFault: 6, store: kubePlan }).map((s) =>
        s.kind === 'store' ? s.action : s.kind,
      ),
    );
    for (const kind of ['api-stop', 'watch-cut', 'api-restore', 'api-recover', 'claim-delete', 'kill', 'restore-state'])
      assert.ok(kinds.has(kind), `${kind} drawn in 200 faults`);
  });
});

describe("the operator's reading of warren status", () => {
  const marker = (pending: string) =>
    'the cluster store is in recovery since 2026-11-29T20:35:50.361Z (it lost its data: the Kubernetes API server ' +
    'answered "list ranges" at resourceVersion 91, lower than 266 this agent had already seen: its data went ' +
    'backwards (its etcd was restored from an older backup, or wiped)): no node allocates until every node listed ' +
    'has accepted the store (`warren store accept` on that node) or been forgotten (`warren node forget`); ' +
    `waiting for ${pending}`;

  it('accepts on a node that stopped because the store went back, or that the marker lists; not on one waiting for others', () => {
    assert.equal(
      judgeProblem(
        'n1',
        "the Kubernetes API server https://127.0.0.1:1 lost its data: this node's Lease warren-node.n1 is back at resourceVersion 65",
      ),
      'accept',
    );
    assert.equal(judgeProblem('n1', marker('n0, n1')), 'accept');
    assert.equal(judgeProblem('n2', marker('n0, n1')), 'waiting');
  });

  it('lets the passing states be, though they name a loss, and calls anything else another reason', () => {
    assert.equal(judgeProblem('n1', undefined), 'serving');
    assert.equal(
      judgeProblem(
        'n1',
        "the cluster store's recovery marker has not been read yet (another node may have found the store lost its data); retrying every 1 s",
      ),
      'serving',
    );
    assert.equal(
      judgeProblem(
        'n1',
        'node n1 is not announced in the cluster store yet (until it is, another agent might hold this node name)',
      ),
      'serving',
    );
    assert.equal(
      judgeProblem('n1', 'node n1 is announced by another instance; this agent stopped allocating'),
      'other',
    );
  });
});

describe("the cluster audit's address arithmetic", () => {
  it('places an address in its block', () => {
    assert.ok(cidrContains('10.239.0.16/28', '10.239.0.16'));
    assert.ok(cidrContains('10.239.0.16/28', '10.239.0.31'));
    assert.ok(!cidrContains('10.239.0.16/28', '10.239.0.32'));
    assert.ok(!cidrContains('10.239.0.16/28', '10.239.0.15'));
  });
});

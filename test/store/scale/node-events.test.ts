/**
 * The scale harness's node loss and node forget (bench/scale/node-events.ts) at 10 simulated nodes
 * against the in-process fake, so the scenarios do not rot: what must hold whatever decides a
 * node's liveness is asserted — no address held twice by the auditor's count after each, and a node
 * back with an empty file hands out none of its killed containers' addresses and holds each of
 * them again for its container (docs/recovery.md, "a node's disk restored") — while the times
 * (how long until the lost nodes' blocks are freed, until the node serves again) are reported,
 * not asserted: they are the liveness mechanism's, which changes apart from the harness.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ScaleCluster } from '../../../bench/scale/cluster.ts';
import { describeNodeForget, describeNodeLoss, nodeForget, nodeLoss } from '../../../bench/scale/node-events.ts';
import { churn, holdBlocks } from '../../../bench/scale/scenarios.ts';

describe('node loss and node forget at 10 simulated nodes (the scale harness)', () => {
  let cluster: ScaleCluster;
  before(async () => {
    cluster = await ScaleCluster.start({ nodes: 10, range: '10.0.0.0/16', blockSize: 28, memory: true });
    await holdBlocks(cluster, 2);
    await churn(cluster, { rate: 10, seconds: 10 });
  });
  after(async () => {
    await cluster?.stop();
  });

  it('two nodes lost: no address held twice, whenever their blocks are freed', async (t) => {
    const loss = await nodeLoss(cluster, { count: 2 });
    t.diagnostic(describeNodeLoss(loss));
    assert.equal(loss.lost.length, 2);
    assert.ok(loss.blocks >= 2, 'each lost node held a block');
    assert.deepEqual(loss.audit.duplicates, []);
    assert.equal(cluster.nodes.length, 8);
  });

  it('a node back with an empty file takes its containers back and hands none of their addresses out again', async (t) => {
    const forget = await nodeForget(cluster, { adds: 4 });
    t.diagnostic(describeNodeForget(forget));
    assert.ok(forget.held > 0, 'the node held addresses when it was killed');
    assert.notEqual(forget.servingAfterSeconds, undefined, 'the node served again');
    assert.equal(forget.restored, forget.held, "each address is its container's again");
    assert.deepEqual(forget.reused, []);
    assert.deepEqual(forget.audit.duplicates, []);
  });
});

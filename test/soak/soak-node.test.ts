/**
 * The soak's node (soak-node.ts) with a real agent on its own SQLite file: what it records of the
 * DELs it sends, which the auditor's explanations stand on (`witness.delSent`). A DEL sent while the
 * agent stops (SIGTERM sent, not exited) may be answered by that agent: it counts as one an agent
 * could take, by the stopping incarnation (kubernetes seed 3839 step 1515, in a trial that ran a
 * node's restart beside the steps after it: such a DEL's release was reported unexplained).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SoakNode } from './soak-node.ts';
import { sqliteBackend } from './store-sqlite.ts';

describe('the soak node', () => {
  it('takes a DEL sent while its agent stops for one the stopping agent may answer', async () => {
    const node = new SoakNode(0, await sqliteBackend.open(1), {});
    try {
      await node.start();
      const running = node.incarnation;
      const since = Date.now();
      const stopping = node.stop();
      const del = node.cni('DEL', 'p0s0', 0);
      await Promise.all([stopping, del]);
      const sent = node.witness.delSent('p0s0', since);
      assert.equal(sent?.incarnation, running, 'sent while an agent ran: the one stopping');
    } finally {
      await node.close();
    }
  });
});

/**
 * The contract of a tier's loan publications (ClusterTier.publishLoan, withdraw), run against
 * every tier that publishes loans: a borrower's loan ledger is published with no claim, read back as
 * a loan under its node and range, replaced by the address's next borrower, and withdrawn only by
 * the node it names; `publish` keeps checking the claim whatever the block says of itself.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { blockKey } from '../../../src/ipam/blocks.ts';
import type { ClusterTier, PublishedBlock } from '../../../src/store/tiered/cluster-tier.ts';
import type { TierFactory } from './tier-conformance.ts';

let serial = 0;

/** A range pool of the test's own and a loan of one address in it, published by `node`. */
function loanOf(node: string, address?: { pool: string; key: string }) {
  serial += 1;
  const pool = address?.pool ?? `10.${200 + (serial % 50)}.0.0/24@loans-${process.pid}-${serial}`;
  const key = address?.key ?? blockKey(pool, `10.${200 + (serial % 50)}.0.7/32`);
  const held = key.slice(key.indexOf('#') + 1, key.indexOf('/', key.indexOf('#')));
  const block: PublishedBlock = {
    key,
    node,
    counts: { allocated: 1, resting: 0 },
    allocations: [
      { pool: key, address: held, network: 'net', containerID: `c-${node}`, ifname: 'eth0', node, createdAt: 1 },
    ],
    publishedAt: 1_700_000_000_000,
    loan: true,
  };
  return { pool, key, block };
}

export function tierLoanConformance(name: string, factory: TierFactory): void {
  describe(`ClusterTier loan publications: ${name}`, () => {
    const opened: ClusterTier[] = [];
    const tier = async (): Promise<ClusterTier> => {
      const t = await factory.create();
      opened.push(t);
      return t;
    };
    after(async () => {
      for (const t of opened) await t.close().catch(() => undefined);
    });

    it("publishes a borrower's loan with no claim, and reads it back as a loan of that node and range", async () => {
      const t = await tier();
      const { pool, key, block } = loanOf(`b-${process.pid}-${serial}`);
      assert.ok(t.publishLoan, 'the tier publishes loans');
      await t.publishLoan(block);
      const read = (await (await tier()).published({ pool, node: block.node })).items;
      assert.deepEqual(
        read.map((b) => [b.key, b.node, b.loan, b.allocations.map((a) => a.containerID)]),
        [[key, block.node, true, [`c-${block.node}`]]],
      );
    });

    it("is replaced by the address's next borrower, and withdrawn only by the node it names", async () => {
      const [first, second] = [await tier(), await tier()];
      const { pool, key, block } = loanOf(`b1-${process.pid}`);
      await first.publishLoan?.(block);
      const next = loanOf(`b2-${process.pid}`, { pool, key }).block;
      await second.publishLoan?.(next);
      const nodes = async () => (await second.published({ pool })).items.map((b) => b.node);
      assert.deepEqual(await nodes(), [next.node]);
      await first.withdraw(key, block.node);
      assert.deepEqual(await nodes(), [next.node], 'the former borrower withdrew nothing of the next one');
      await second.withdraw(key, next.node);
      assert.deepEqual(await nodes(), []);
    });

    it('still refuses to publish a block with no claim, whatever it says of itself', async () => {
      const t = await tier();
      const { pool, block } = loanOf(`b3-${process.pid}`);
      await assert.rejects(t.publish(block));
      assert.deepEqual((await t.published({ pool })).items, []);
    });
  });
}

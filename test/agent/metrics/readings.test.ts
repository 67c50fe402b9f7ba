/**
 * What a scrape reads: per range the figures of its pool report and, on a store shared by nodes,
 * the blocks this node owns and the blocks of other nodes it allocated from (borrowed).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import { blockKey } from '../../../src/ipam/blocks.ts';
import type { PoolReport } from '../../../src/api/protocol.ts';
import { poolFigures } from '../../../src/agent/metrics/readings.ts';

const RANGE = '10.60.0.0/16';
const block = (cidr: string, node?: string): PoolReport => ({
  pool: blockKey(RANGE, cidr),
  allocated: 1,
  resting: 0,
  ...(node === undefined ? {} : { node }),
});
const mine = (pool: string): Allocation =>
  ({
    pool,
    address: '10.60.0.1',
    network: 'n',
    containerID: 'c',
    ifname: 'eth0',
    node: 'n1',
    createdAt: 0,
  }) as Allocation;

describe('poolFigures', () => {
  it('reports ranges only, with capacity, allocated and resting, and no blocks on a store of one node', () => {
    const pools: PoolReport[] = [{ pool: '10.61.0.0/24', capacity: '254', allocated: 3, resting: 1 }];
    assert.deepEqual(poolFigures(pools, [], 'n1', false), [
      { pool: '10.61.0.0/24', capacity: 254, allocated: 3, resting: 1 },
    ]);
  });

  it('counts the blocks this node owns and the blocks of others it holds addresses in', () => {
    const pools: PoolReport[] = [
      { pool: RANGE, capacity: '65534', allocated: 4, resting: 0, blockPrefix: 26, blocks: 3 },
      block('10.60.0.0/26', 'n1'),
      block('10.60.0.64/26', 'n1'),
      block('10.60.0.128/26', 'n2'),
      block('10.60.0.192/26', 'n3'),
    ];
    const own = [
      mine(blockKey(RANGE, '10.60.0.0/26')),
      mine(blockKey(RANGE, '10.60.0.128/26')),
      mine(blockKey(RANGE, '10.60.0.128/26')),
    ];
    assert.deepEqual(poolFigures(pools, own, 'n1', true), [
      { pool: RANGE, capacity: 65534, allocated: 4, resting: 0, blocks: { owned: 2, borrowed: 1 } },
    ]);
  });
});

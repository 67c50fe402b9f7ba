/**
 * The ClusterTier contract (tier-conformance.ts) on MemoryTier, the tier the two-tier store's unit
 * tests run on: what they prove holds only as far as MemoryTier keeps the contract KubeTier keeps.
 */
import { ManualClock } from '../../../src/core/clock.ts';
import { MemoryTier } from './memory-tier.ts';
import { holdingsConformance } from './holdings-conformance.ts';
import { tierConformance } from './tier-conformance.ts';
import { tierLoanConformance } from './tier-loans.ts';

const clock = new ManualClock(1_000_000);
const cluster = new MemoryTier({ clock, leaseSeconds: 15 });

tierConformance('memory', {
  create: async () => cluster.session(),
  clock,
  leaseSeconds: 15,
  removeClaimByHand: async (key) => cluster.deleteClaim(key),
});

tierLoanConformance('memory', { create: async () => cluster.session() });
holdingsConformance('memory', { create: async () => cluster.session(), clock, leaseSeconds: 15 });

/**
 * The membership the two-tier store offers (`cluster.membership`): its tier's, with what the node's
 * file and claims add to it.
 * - `keepRecovery` is told why a range of this node is halted on a block another node holds
 *   (tiered/reclaim.ts), so the node joins a recovery under way (recovery.ts `joinRecovery`);
 * - `accept` (`warren store accept`) of a node halted, or waited for by a recovery, first has the
 *   claims it cached judged again by a listing before any of them serves an ADD (claims.ts `rebase`:
 *   the store's data went back, so their versions are of a history it no longer has); it also lifts
 *   what the file check withheld and releases the announced placeholders (tiered/file-check.ts), has
 *   every block published anew (tiered/publisher.ts `accepted`), then checks this node's claims at
 *   once: the blocks it claimed again are held again before the next `keepRecovery`, which would
 *   otherwise still see their ranges halted and put the node back on the marker it just left.
 */
import type { AcceptReport, Membership } from '../store.ts';
import type { TieredChores } from './chores.ts';
import type { TieredClaims } from './claims.ts';
import type { TieredPublisher } from './publisher.ts';

/** `membership` with the publisher's part of an accept, the claims' halts and a claim check after an accept. */
export function storeMembership(
  membership: Membership,
  claims: Pick<TieredClaims, 'halts' | 'rebase' | 'node'>,
  publisher: Pick<TieredPublisher, 'accepted'>,
  chores: Pick<TieredChores, 'check'>,
): Membership {
  return {
    announce: (node, info) => membership.announce(node, info),
    halted: () => membership.halted(),
    async accept(): Promise<AcceptReport> {
      // Halted (the store's data went back, or another instance took the node over), or waited for by a recovery.
      const lost = membership.halted() !== undefined || membership.recovery()?.pending.includes(claims.node) === true;
      if (lost) claims.rebase();
      const report = await membership.accept();
      await publisher.accepted();
      await chores.check();
      return report;
    },
    identity: () => membership.identity(),
    liveNodes: () => membership.liveNodes(),
    alive: (node, told) => membership.alive(node, told),
    renew: () => membership.renew(),
    withdraw: () => membership.withdraw(),
    claimTask: (task) => membership.claimTask(task),
    releaseTask: (task) => membership.releaseTask(task),
    recovery: () => membership.recovery(),
    keepRecovery: () => membership.keepRecovery(claims.halts()[0]),
    leaveRecovery: (node) => membership.leaveRecovery(node),
  };
}

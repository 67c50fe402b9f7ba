/**
 * etcd's history and the room left for it, judged from what the agent read (DoctorFacts
 * store.history, store/etcd-tier/history.ts). etcd keeps every revision until it is compacted: one that
 * never compacts grows its database with every ADD until it reaches its quota
 * (--quota-backend-bytes, 2 GiB by default), raises NOSPACE and refuses every write, so that no ADD
 * and no DEL commits any more.
 *
 * The rules, each a finding with the etcd flags and commands that fix it:
 * - a NOSPACE alarm is raised: an error (`etcd-nospace`), ADDs fail now;
 * - the database is over NEAR_QUOTA_RATIO of its quota (the member's, or etcd's default when it
 *   could not be read): a warning (`etcd-near-quota`);
 * - nothing was ever compacted and the history is longer than NO_COMPACTION_REVISIONS revisions:
 *   a warning (`etcd-no-compaction`) — an etcd run with --auto-compaction-* compacts long before.
 * Nothing is said on other stores (their facts carry no history). Pure.
 */
import type { DoctorFacts } from '../../api/doctor.ts';
import { type Finding, error, ok, warning } from './finding.ts';

type HistoryReading = Exclude<NonNullable<DoctorFacts['store']['history']>, { readonly error: string }>;

/** A history this long that was never compacted: etcd runs without --auto-compaction-*. */
export const NO_COMPACTION_REVISIONS = 10_000;
/** The share of its quota past which etcd's database is worth a word. */
export const NEAR_QUOTA_RATIO = 0.8;
/** etcd's quota when --quota-backend-bytes is not given. */
export const ETCD_DEFAULT_QUOTA_BYTES = 2 * 1024 ** 3;

/** The flags that make etcd compact its history by itself, on every member. */
export const AUTO_COMPACTION_FLAGS = '--auto-compaction-mode=periodic --auto-compaction-retention=1h';

function size(bytes: number): string {
  if (bytes >= 1024 ** 3) return `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
  if (bytes >= 1024 ** 2) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${Math.round(bytes / 1024)} KiB`;
}

/** The database against its quota, and what of it is in use, for a detail. */
function room(h: HistoryReading): string {
  const quota = h.quotaBytes ?? ETCD_DEFAULT_QUOTA_BYTES;
  const percent = Math.round((100 * h.dbSizeBytes) / quota);
  const inUse = h.dbSizeInUseBytes === undefined ? '' : ` (${size(h.dbSizeInUseBytes)} in use)`;
  const of =
    h.quotaBytes === undefined
      ? `etcd's default quota ${size(quota)} (the member's own could not be read)`
      : `its quota ${size(quota)}`;
  return `database ${size(h.dbSizeBytes)}${inUse}, ${percent}% of ${of}`;
}

/** Compact up to the current revision, then give the freed pages back on every member. */
function reclaim(h: HistoryReading): string {
  return (
    `compact etcd's history (etcdctl compact ${h.revision}) and defragment every member ` + '(etcdctl defrag --cluster)'
  );
}

export function historyFindings(facts: DoctorFacts): Finding[] {
  const h = facts.store.history;
  if (h === undefined) return [];
  if ('error' in h)
    return [
      warning(
        'etcd-history-unread',
        "etcd's history and room could not be read",
        `${h.error}; whether etcd compacts its history and how near its quota it is are unknown`,
        "check that the etcd endpoints answer from this node with the agent's certificates; then run " +
          '`warren doctor` again',
      ),
    ];
  const found: Finding[] = [];
  const quota = h.quotaBytes ?? ETCD_DEFAULT_QUOTA_BYTES;
  if (h.noSpace) {
    found.push(
      error(
        'etcd-nospace',
        'etcd has run out of space and refuses every write (NOSPACE alarm)',
        `${h.alarms.join(', ')}; ${room(h)}; no ADD or DEL commits until the alarm is disarmed`,
        `${reclaim(h)}, then disarm the alarm (etcdctl alarm disarm); start etcd with ${AUTO_COMPACTION_FLAGS} ` +
          'so it does not fill again, or give it a larger --quota-backend-bytes',
      ),
    );
  } else if (h.dbSizeBytes >= NEAR_QUOTA_RATIO * quota) {
    found.push(
      warning(
        'etcd-near-quota',
        `etcd's database is near its quota (${Math.round((100 * h.dbSizeBytes) / quota)}%)`,
        `${room(h)}; at the quota etcd raises NOSPACE and refuses every write: ADDs and DELs fail`,
        `${reclaim(h)}; start etcd with ${AUTO_COMPACTION_FLAGS}, or give it a larger --quota-backend-bytes`,
      ),
    );
  }
  if (!h.compacted && h.revision > NO_COMPACTION_REVISIONS) {
    found.push(
      warning(
        'etcd-no-compaction',
        'etcd never compacts its history',
        `revision ${h.revision} and no revision ever compacted away: every ADD and DEL grows the database ` +
          `for good; ${room(h)}; at the quota etcd refuses every write`,
        `start every etcd member with ${AUTO_COMPACTION_FLAGS} (or compact from a job); ${reclaim(h)} once ` +
          'to give back what the history holds now',
      ),
    );
  }
  if (found.length === 0)
    found.push(
      ok(
        'etcd-history-in-bounds',
        "etcd's history is in bounds",
        `revision ${h.revision}, ${h.compacted ? 'compacted' : 'never compacted yet'}; ${room(h)}`,
      ),
    );
  return found;
}

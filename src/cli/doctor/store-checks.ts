/**
 * The agent's store, judged from what it reports (DoctorFacts['store'], DoctorFacts['clockSkew']): its health
 * (unhealthy is an error: ADDs fail until it recovers), whether it allocates on its cluster store at all, old
 * one-tier data left in etcd (a warning: each node moves its own at its next start), its durability
 * (synchronous=NORMAL is a warning: an address can be handed out twice after a power loss), and this node's
 * clock against etcd (beyond a node lease is an error: liveness and cool-downs are timed by it).
 * Pure.
 */
import type { DoctorFacts } from '../../api/doctor.ts';
import { type Finding, error, ok, warning } from './finding.ts';

/** Skew beyond the clock's resolution worth a word: timestamps across nodes stop lining up. */
export const SKEW_WARNING_MS = 2_000;
/** Skew beyond which leases go wrong: the agent's default node lease (--node-lease) is 10 s. */
export const SKEW_ERROR_MS = 10_000;

/** Where the store keeps what, for the store's finding. */
function storeWhere(s: DoctorFacts['store']): string {
  switch (s.kind) {
    case 'etcd':
      return (
        "this node's addresses in SQLite, on this node; block owners and published allocations in etcd " +
        `(endpoints ${(s.etcdEndpoints ?? []).join(', ')})`
      );
    case 'kubernetes':
      return (
        "this node's addresses in SQLite, on this node; block owners and published allocations in the Kubernetes " +
        `API, Leases in namespace ${s.kubeNamespace ?? '?'}`
      );
    case 'sqlite':
      return 'SQLite, on this node';
    default:
      return ((never: never) => never)(s.kind);
  }
}

export function storeFindings(facts: DoctorFacts): Finding[] {
  const s = facts.store;
  const found: Finding[] = [];
  if (s.healthy) {
    found.push(ok('store-healthy', `the store is healthy: ${s.description}`, storeWhere(s)));
  } else {
    found.push(
      error(
        'store-unhealthy',
        `the store is unhealthy: ${s.description}`,
        `${s.error ?? 'no reason given'}; ADDs fail (CNI error 11) until it recovers`,
        s.kind === 'etcd'
          ? `check that ${(s.etcdEndpoints ?? []).join(', ') || 'the etcd endpoints'} answer from this node ` +
              `(etcdctl endpoint health) with the agent's certificates`
          : s.kind === 'kubernetes'
            ? "check that the API server answers from this node with the agent's credentials (its service " +
              'account, or --kubeconfig) and that deploy/ (CRDs, RBAC) is applied; ADDs with room in own blocks ' +
              'still succeed'
            : "check the database file's disk (space, read-only mount) and permissions, then restart the agent; " +
              '`warren status` shows the error',
      ),
    );
  }
  if (s.clusterProblem !== undefined) {
    found.push(
      error(
        'store-not-allocating',
        'this node does not allocate on its cluster store',
        `${s.clusterProblem}; ADDs fail (CNI error 11) and STATUS answers 50`,
        'see docs/recovery.md, "When etcd lost its data" (or "When the API server lost its data" on the kubernetes ' +
          'store): if the store lost its data, restore it from a backup or accept it as it is (`warren store ' +
          'accept` on each node that stopped) after checking; while the cluster is in recovery, accept on (or ' +
          "`warren node forget`) each node it waits for; if another agent holds this node's name, stop one of " +
          'them or give it another --node-name',
      ),
    );
  }
  if (s.legacy !== undefined) {
    const nodes = Object.entries(s.legacy.blocks).map(([node, n]) => `${node} (${n})`);
    found.push(
      warning(
        'etcd-legacy-data',
        'etcd holds data of the old one-tier layout (units/, owners/)',
        `old blocks of node${nodes.length === 1 ? '' : 's'} ${nodes.join(', ') || 'none'}, ` +
          `${s.legacy.ranges} old range documents: each node moves its own old blocks into its SQLite file ` +
          'at its next start',
        'start the agents of those nodes (the new version); a node that never comes back: delete its Node ' +
          '(node forget frees its blocks and removes its old documents) — see docs/etcd.md, "Upgrading from the ' +
          'one-tier etcd store"',
      ),
    );
  }
  if (s.synchronous === 'NORMAL') {
    found.push(
      warning(
        'store-durability-normal',
        'the store commits with synchronous=NORMAL',
        'a committed allocation survives a crash of the agent, but not a power loss: after one, an address ' +
          'handed out may be handed out again',
        'start the agent with --sync FULL (the default)',
      ),
    );
  } else if (s.synchronous === 'FULL') {
    found.push(
      ok('store-durable', 'the store commits with synchronous=FULL', 'a committed allocation survives a power loss'),
    );
  }
  return found;
}

export function clockFindings(facts: DoctorFacts): Finding[] {
  const c = facts.clockSkew;
  if (c === undefined) return [];
  const fix = "synchronise this node's clock (chrony, or systemd-timesyncd: timedatectl set-ntp true)";
  if ('error' in c) {
    return [
      warning(
        'clock-skew-unmeasured',
        `the clock could not be compared with etcd${c.endpoint === undefined ? '' : ` at ${c.endpoint}`}`,
        c.error,
        'check that the etcd endpoints answer from this node; then run `warren doctor` again',
      ),
    ];
  }
  const beyond = Math.abs(c.skewMs) - c.resolutionMs;
  const detail =
    `this node is ${Math.abs(c.skewMs)} ms ${c.skewMs >= 0 ? 'ahead of' : 'behind'} ${c.endpoint} ` +
    `(measured to ${c.resolutionMs} ms)`;
  if (beyond > SKEW_ERROR_MS)
    return [
      error(
        'clock-skew-beyond-lease',
        "this node's clock is off by more than a node lease",
        `${detail}; node liveness and address cool-downs are timed by it`,
        fix,
      ),
    ];
  if (beyond > SKEW_WARNING_MS)
    return [
      warning('clock-skew', "this node's clock is off", `${detail}; times recorded by nodes do not line up`, fix),
    ];
  return [ok('clock-in-step', "this node's clock agrees with etcd", detail)];
}

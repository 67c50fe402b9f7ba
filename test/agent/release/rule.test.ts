/**
 * The release rule as a table: each row is an intent, what its holder holds, what can be observed,
 * and the action the rule must return. No store, clock or file system: the rule is a pure function.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ReleaseIntent, addressHolderOf } from '../../../src/agent/release/intent.ts';
import {
  type Observed,
  POD_RELEASE_WHY,
  type ReleaseAction,
  decide,
  needsNamespaces,
} from '../../../src/agent/release/rule.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import type { Moment } from '../../../src/core/moment.ts';
import type { NetnsObservation } from '../../../src/sources/netns.ts';

const T = 1_000_000;
/** The boot the rule decides in, and an earlier one. */
const BOOT = 'boot-now';
const EARLIER = 'boot-earlier';
/** A moment of this boot whose wall and monotonic readings agree (rows about ordering set them apart). */
const at = (ms: number, wall = ms, boot = BOOT): Moment => ({ wall, stamp: { boot, at: ms } });
const HOUR = 3_600_000;
const GONE = '/run/netns/gone';
const THERE = '/run/netns/there';
const UNSEEN = '/mnt/elsewhere/ns';
const PROC = '/proc/42/ns/net';

/** A row may set a field to undefined: as the store hands it back when the field was not recorded. */
function alloc(over: { readonly [K in keyof Allocation]?: Allocation[K] | undefined } = {}): Allocation {
  const a = {
    pool: 'net/10.0.0.0/24',
    address: '10.0.0.2',
    network: 'net',
    containerID: 'c1',
    ifname: 'eth0',
    node: 'n',
    netns: THERE,
    createdAt: T,
    ...over,
  } as Allocation;
  // Stamped on this boot's monotonic clock at the same reading as its wall clock, unless the row says otherwise.
  return 'createdStamp' in over ? a : { ...a, createdStamp: { boot: BOOT, at: a.createdAt } };
}

const owner = { network: 'net', containerID: 'c1', ifname: 'eth0' };
const namespaces = new Map<string, NetnsObservation>([
  [GONE, { kind: 'gone' }],
  [THERE, { kind: 'exists' }],
  [UNSEEN, { kind: 'unobservable', reason: '/mnt/elsewhere is not a mount point here' }],
  [PROC, { kind: 'unobservable', reason: 'a process exiting does not prove the namespace is gone' }],
]);
const seen = (exited = false): Observed => ({ exited, namespaces, boot: BOOT });

interface Row {
  readonly name: string;
  readonly intent: ReleaseIntent;
  readonly held: readonly Allocation[];
  readonly observed?: Observed;
  readonly action: ReleaseAction;
}

const journal = (recordedAt: number | Moment): ReleaseIntent => ({
  kind: 'journal-del',
  file: 'f.release',
  owner,
  recordedAt: typeof recordedAt === 'number' ? at(recordedAt) : recordedAt,
});
/** Container intents are observed at T+5 unless the row says otherwise. */
const SEEN = at(T + 5);
const taskExit: ReleaseIntent = { kind: 'task-exited', containerID: 'c1', event: 'task-exit', observedAt: SEEN };
const deleted: ReleaseIntent = { kind: 'container-deleted', containerID: 'c1', observedAt: SEEN };
const recheck: ReleaseIntent = { kind: 'namespace-recheck', containerID: 'c1', observedAt: SEEN };
const EXITED_WHY = 'task exited and its network namespace is gone';

const UID = '7d3c0a4e-1111-4d5e-9c1b-0a0b0c0d0e0f';
/** Seen gone at T+10 (a replacement with the same name has another UID), grace until T+1000. */
const podGone = (): ReleaseIntent => ({
  kind: 'pod-gone',
  pod: { uid: UID, namespace: 'default', name: 'web-0' },
  because: 'deleted',
  goneAt: at(T + 10),
  releaseAfter: at(T + 1_000),
});

const PODMAN_NS = '/run/netns/netns-5a1f';
const PODMAN = { adapter: 'podman', netnsPrefixes: ['/run/netns/netns-'] };

const TABLE: readonly Row[] = [
  // Journaled DELs: they speak for what was allocated before they were recorded.
  {
    name: 'journal DEL, allocation made before it was recorded: released, limited to that instant',
    intent: journal(T + 5),
    held: [alloc()],
    action: { kind: 'release', owners: [{ owner, createdAtOrBefore: at(T + 5) }], why: 'missed delete' },
  },
  {
    name: 'journal DEL, only an allocation made after it was recorded (a retried ADD): dropped, the address is in use',
    intent: journal(T - 1),
    held: [alloc()],
    action: { kind: 'drop', reason: 'what is held was allocated after the DEL was recorded', forgetExited: false },
  },
  {
    name: 'journal DEL, nothing held (released already): dropped',
    intent: journal(T),
    held: [],
    action: { kind: 'drop', reason: 'nothing is held', forgetExited: false },
  },
  // Which came first is told by the boot's monotonic clock, never by two wall-clock readings.
  {
    name: 'journal DEL recorded after the ADD while the wall clock was stepped back an hour between them: released (an NTP step never strands an address)',
    intent: journal(at(T + 5, T - HOUR)),
    held: [alloc()],
    action: { kind: 'release', owners: [{ owner, createdAtOrBefore: at(T + 5, T - HOUR) }], why: 'missed delete' },
  },
  {
    name: 'journal DEL recorded before a retried ADD while the wall clock was stepped forward an hour: dropped, the new address is in use',
    intent: journal(at(T - 1, T + HOUR)),
    held: [alloc()],
    action: { kind: 'drop', reason: 'what is held was allocated after the DEL was recorded', forgetExited: false },
  },
  {
    name: 'journal DEL of an earlier boot, allocation of this boot: dropped whatever the wall clocks say (the ADD came after the reboot)',
    intent: journal(at(5, T + HOUR, EARLIER)),
    held: [alloc()],
    action: { kind: 'drop', reason: 'what is held was allocated after the DEL was recorded', forgetExited: false },
  },
  {
    name: 'journal DEL of this boot, allocation of an earlier boot: released whatever the wall clocks say',
    intent: journal(at(5, T - HOUR)),
    held: [alloc({ createdStamp: { boot: EARLIER, at: T } })],
    action: { kind: 'release', owners: [{ owner, createdAtOrBefore: at(5, T - HOUR) }], why: 'missed delete' },
  },
  {
    name: 'journal DEL written by an older plugin (no stamp): ordered by the wall clock, as before',
    intent: journal({ wall: T + 5 }),
    held: [alloc()],
    action: { kind: 'release', owners: [{ owner, createdAtOrBefore: { wall: T + 5 } }], why: 'missed delete' },
  },
  {
    name: 'journal DEL and allocation of two different earlier boots: the wall clock is all there is',
    intent: journal(at(5, T - 1, 'boot-older')),
    held: [alloc({ createdStamp: { boot: EARLIER, at: 1 } })],
    action: { kind: 'drop', reason: 'what is held was allocated after the DEL was recorded', forgetExited: false },
  },
  {
    name: "an allocation another node made, on a store nodes share: its boot is another host's, so the wall clock orders it",
    intent: journal(at(5, T + 5)),
    held: [alloc({ node: 'other', createdStamp: { boot: 'boot-of-other-host', at: 1 } })],
    observed: { ...seen(), node: 'n' },
    action: { kind: 'release', owners: [{ owner, createdAtOrBefore: at(5, T + 5) }], why: 'missed delete' },
  },
  {
    name: "an allocation another node made after this node's DEL by the wall clock: dropped, never taken for one of an earlier boot here",
    intent: journal(at(5, T - 1)),
    held: [alloc({ node: 'other', createdStamp: { boot: 'boot-of-other-host', at: 1 } })],
    observed: { ...seen(), node: 'n' },
    action: { kind: 'drop', reason: 'what is held was allocated after the DEL was recorded', forgetExited: false },
  },
  // Every intent speaks only for what was allocated before it was observed (a container ID ADDed
  // again since — a DEL + ADD while the intent backed off — keeps its new address).
  {
    name: 'container delete observed before a DEL + ADD of the same container ID: dropped, the new allocation stays',
    intent: deleted,
    held: [alloc({ createdAt: T + 6 })],
    action: {
      kind: 'drop',
      reason: 'what is held was allocated after the container was reported deleted',
      forgetExited: false,
    },
  },
  {
    name: 'container delete: an attachment ADDed after it was observed stays, the older one goes',
    intent: deleted,
    held: [alloc(), alloc({ ifname: 'net1', address: '10.0.1.2', createdAt: T + 6 })],
    action: { kind: 'release', owners: [{ owner, createdAtOrBefore: SEEN }], why: 'container deleted' },
  },
  {
    name: 'container delete observed after the ADD while the wall clock was stepped back: released',
    intent: { kind: 'container-deleted', containerID: 'c1', observedAt: at(T + 5, T - HOUR) },
    held: [alloc()],
    action: { kind: 'release', owners: [{ owner, createdAtOrBefore: at(T + 5, T - HOUR) }], why: 'container deleted' },
  },
  {
    name: 'task exit observed before the container ID was ADDed again (its new namespace gone too): dropped',
    intent: taskExit,
    held: [alloc({ netns: GONE, createdAt: T + 6 })],
    action: {
      kind: 'drop',
      reason: 'what is held was allocated after its task was reported exited',
      forgetExited: false,
    },
  },
  {
    name: 'namespace recheck of an exit seen before the container ID was ADDed again: dropped',
    intent: recheck,
    held: [alloc({ netns: GONE, createdAt: T + 6 })],
    observed: seen(true),
    action: {
      kind: 'drop',
      reason: 'what is held was allocated after its task was reported exited',
      forgetExited: false,
    },
  },
  {
    name: 'absent at resync: an attachment ADDed after the listing stays',
    intent: { kind: 'absent-at-resync', containerID: 'c1', observedAt: at(T + 20), cutoff: at(T) },
    held: [alloc(), alloc({ ifname: 'net1', address: '10.0.1.2', createdAt: T + 21 })],
    action: {
      kind: 'release',
      owners: [{ owner, createdAtOrBefore: at(T + 20) }],
      why: 'container gone when containerd was resynchronised',
    },
  },
  {
    name: 'pod gone: the wall clock stepped forward past the grace does not end it (the grace runs on the monotonic clock)',
    intent: podGone(),
    held: [alloc({ podUID: UID })],
    observed: { ...seen(), now: at(T + 20, T + HOUR) },
    action: {
      kind: 'wait-until',
      owners: [],
      why: POD_RELEASE_WHY.namespaceGone,
      until: at(T + 1_000),
      waitingFor: THERE,
    },
  },
  {
    name: 'pod gone: the wall clock stepped back does not stretch the grace',
    intent: podGone(),
    held: [alloc({ podUID: UID })],
    observed: { ...seen(), now: at(T + 1_000, T - HOUR) },
    action: { kind: 'release', owners: [{ owner, createdAtOrBefore: at(T + 10) }], why: POD_RELEASE_WHY.graceExpired },
  },
  // Container deletes: the record is gone, nothing can use the addresses.
  {
    name: 'container delete: every attachment of the container released, whatever its namespace shows',
    intent: deleted,
    held: [
      alloc(),
      alloc({ address: 'fd00::2', pool: 'net/fd00::/64' }),
      alloc({ ifname: 'net1', address: '10.0.1.2', netns: UNSEEN }),
    ],
    action: {
      kind: 'release',
      owners: [
        { owner, createdAtOrBefore: SEEN },
        { owner: { ...owner, ifname: 'net1' }, createdAtOrBefore: SEEN },
      ],
      why: 'container deleted',
    },
  },
  {
    name: 'container delete of a container that holds nothing: dropped, its exited mark forgotten',
    intent: deleted,
    held: [],
    action: { kind: 'drop', reason: 'nothing is held', forgetExited: true },
  },
  // Task exits: a process exiting is not proof; its namespace being gone is.
  {
    name: 'task exit, namespace present: kept, waiting for the namespace',
    intent: taskExit,
    held: [alloc()],
    action: { kind: 'wait-for-namespace', owners: [], why: EXITED_WHY, waitingFor: THERE },
  },
  {
    name: 'task exit, namespace gone: released',
    intent: taskExit,
    held: [alloc({ netns: GONE })],
    action: { kind: 'release', owners: [{ owner, netns: GONE, createdAtOrBefore: SEEN }], why: EXITED_WHY },
  },
  {
    name: 'task delete, namespace gone: released like a task exit',
    intent: { kind: 'task-exited', containerID: 'c1', event: 'task-delete', observedAt: SEEN },
    held: [alloc({ netns: GONE })],
    action: { kind: 'release', owners: [{ owner, netns: GONE, createdAtOrBefore: SEEN }], why: EXITED_WHY },
  },
  {
    name: 'task exit, namespace where the agent cannot see: kept (never judged by what cannot be seen)',
    intent: taskExit,
    held: [alloc({ netns: UNSEEN })],
    action: { kind: 'wait-for-namespace', owners: [], why: EXITED_WHY, waitingFor: UNSEEN },
  },
  {
    name: "task exit, a process's namespace (/proc/<pid>/ns/net): kept",
    intent: taskExit,
    held: [alloc({ netns: PROC })],
    action: { kind: 'wait-for-namespace', owners: [], why: EXITED_WHY, waitingFor: PROC },
  },
  {
    name: 'task exit, no namespace recorded at ADD: kept, saying so',
    intent: taskExit,
    held: [alloc({ netns: undefined })],
    action: { kind: 'wait-for-namespace', owners: [], why: EXITED_WHY, waitingFor: '(no namespace recorded)' },
  },
  {
    name: 'task exit, one attachment in a gone namespace and one in a present one: the gone one released, the other waits',
    intent: taskExit,
    held: [alloc({ netns: GONE }), alloc({ ifname: 'net1', address: '10.0.1.2' })],
    action: {
      kind: 'wait-for-namespace',
      owners: [{ owner, netns: GONE, createdAtOrBefore: SEEN }],
      why: EXITED_WHY,
      waitingFor: THERE,
    },
  },
  {
    name: 'task exit of a container that holds nothing: dropped, forgotten',
    intent: taskExit,
    held: [],
    action: { kind: 'drop', reason: 'nothing is held', forgetExited: true },
  },
  // Looking again at an exited container (a netns directory lost an entry; a reconcile pass).
  {
    name: 'namespace recheck of an exited container whose namespace is now gone: released',
    intent: recheck,
    held: [alloc({ netns: GONE })],
    observed: seen(true),
    action: { kind: 'release', owners: [{ owner, netns: GONE, createdAtOrBefore: SEEN }], why: EXITED_WHY },
  },
  {
    name: 'namespace recheck of an exited container whose namespace is still there: still waiting',
    intent: recheck,
    held: [alloc()],
    observed: seen(true),
    action: { kind: 'wait-for-namespace', owners: [], why: EXITED_WHY, waitingFor: THERE },
  },
  {
    name: 'namespace recheck of a container not marked exited (it was deleted meanwhile, or never exited): dropped',
    intent: recheck,
    held: [alloc({ netns: GONE })],
    observed: seen(false),
    action: { kind: 'drop', reason: 'the container is not waiting for its namespace', forgetExited: false },
  },
  // Resynchronisation: containers the runtime no longer lists, with a grace for ADDs in flight.
  {
    name: 'absent at resync, allocated before the grace began: every attachment released',
    intent: { kind: 'absent-at-resync', containerID: 'c1', observedAt: at(T + 20), cutoff: at(T) },
    held: [alloc(), alloc({ ifname: 'net1', address: '10.0.1.2', createdAt: T + 10 })],
    action: {
      kind: 'release',
      owners: [
        { owner, createdAtOrBefore: at(T + 20) },
        { owner: { ...owner, ifname: 'net1' }, createdAtOrBefore: at(T + 20) },
      ],
      why: 'container gone when containerd was resynchronised',
    },
  },
  {
    name: 'absent at resync, allocated within the grace (an ADD may be in flight): kept',
    intent: { kind: 'absent-at-resync', containerID: 'c1', observedAt: at(T + 20), cutoff: at(T - 1) },
    held: [alloc()],
    action: { kind: 'drop', reason: 'allocated within the resync grace period', forgetExited: false },
  },
  {
    name: 'absent at resync, nothing held any more: dropped, forgotten',
    intent: { kind: 'absent-at-resync', containerID: 'c1', observedAt: at(T + 20), cutoff: at(T) },
    held: [],
    action: { kind: 'drop', reason: 'nothing is held', forgetExited: true },
  },
  // The namespace sweep, looked at again when the intent runs.
  {
    name: 'netns sweep, namespace still gone: the owner released, limited to the allocation judged',
    intent: { kind: 'netns-gone', owner, netns: GONE, createdAt: at(T) },
    held: [alloc({ netns: GONE })],
    action: {
      kind: 'release',
      owners: [{ owner, netns: GONE, createdAtOrBefore: at(T) }],
      why: 'network namespace is gone',
    },
  },
  {
    name: 'netns sweep, the namespace is there again: dropped',
    intent: { kind: 'netns-gone', owner, netns: THERE, createdAt: at(T) },
    held: [alloc()],
    action: {
      kind: 'drop',
      reason: `network namespace ${THERE} is not gone now, or what is held is newer`,
      forgetExited: false,
    },
  },
  {
    name: 'netns sweep, the namespace cannot be observed now: dropped',
    intent: { kind: 'netns-gone', owner, netns: UNSEEN, createdAt: at(T) },
    held: [alloc({ netns: UNSEEN })],
    action: {
      kind: 'drop',
      reason: `network namespace ${UNSEEN} is not gone now, or what is held is newer`,
      forgetExited: false,
    },
  },
  {
    name: 'netns sweep, only an allocation made after the one judged (ADDed again): dropped',
    intent: { kind: 'netns-gone', owner, netns: GONE, createdAt: at(T - 1) },
    held: [alloc({ netns: GONE })],
    action: {
      kind: 'drop',
      reason: 'what is held was allocated after the namespace sweep judged it',
      forgetExited: false,
    },
  },
  {
    name: 'netns sweep of a namespace the owner was ADDed out of (a re-ADD moved it): never releases the address it took along',
    intent: { kind: 'netns-gone', owner, netns: GONE, createdAt: at(T) },
    held: [alloc({ netns: '/run/netns/also-gone' })],
    observed: { exited: false, namespaces: new Map([...namespaces, ['/run/netns/also-gone', { kind: 'gone' }]]) },
    action: {
      kind: 'drop',
      reason: `network namespace ${GONE} is not gone now, or what is held is newer`,
      forgetExited: false,
    },
  },
  // Pods Kubernetes no longer runs: a pod object gone is not proof its sandbox is.
  {
    name: 'pod gone, its namespace gone: released at once, limited to what was allocated before it went',
    intent: podGone(),
    held: [alloc({ podUID: UID, netns: GONE })],
    action: {
      kind: 'release',
      owners: [{ owner, netns: GONE, createdAtOrBefore: at(T + 10) }],
      why: POD_RELEASE_WHY.namespaceGone,
    },
  },
  {
    name: 'pod gone (force-deleted), its namespace still there, within the grace: kept, looked at again when the grace ends',
    intent: podGone(),
    held: [alloc({ podUID: UID })],
    observed: { ...seen(), now: at(T + 20) },
    action: {
      kind: 'wait-until',
      owners: [],
      why: POD_RELEASE_WHY.namespaceGone,
      until: at(T + 1_000),
      waitingFor: THERE,
    },
  },
  {
    name: 'pod gone, its namespace unobservable, within the grace: kept (what cannot be observed proves nothing)',
    intent: podGone(),
    held: [alloc({ podUID: UID, netns: UNSEEN })],
    observed: { ...seen(), now: at(T + 999) },
    action: {
      kind: 'wait-until',
      owners: [],
      why: POD_RELEASE_WHY.namespaceGone,
      until: at(T + 1_000),
      waitingFor: UNSEEN,
    },
  },
  {
    name: 'pod gone, its namespace still there, grace over: released',
    intent: podGone(),
    held: [alloc({ podUID: UID })],
    observed: { ...seen(), now: at(T + 1_000) },
    action: { kind: 'release', owners: [{ owner, createdAtOrBefore: at(T + 10) }], why: POD_RELEASE_WHY.graceExpired },
  },
  {
    name: 'pod gone, decided without a time: never past its grace',
    intent: podGone(),
    held: [alloc({ podUID: UID })],
    action: {
      kind: 'wait-until',
      owners: [],
      why: POD_RELEASE_WHY.namespaceGone,
      until: at(T + 1_000),
      waitingFor: THERE,
    },
  },
  {
    name: 'pod gone, one attachment in a gone namespace and one in a live one: the first released now, the second waits',
    intent: podGone(),
    held: [alloc({ podUID: UID, netns: GONE }), alloc({ podUID: UID, ifname: 'net1', address: '10.0.1.2' })],
    observed: { ...seen(), now: at(T + 20) },
    action: {
      kind: 'wait-until',
      owners: [{ owner, netns: GONE, createdAtOrBefore: at(T + 10) }],
      why: POD_RELEASE_WHY.namespaceGone,
      until: at(T + 1_000),
      waitingFor: THERE,
    },
  },
  {
    name: 'pod gone, only an allocation made after it was seen gone: dropped, that is an ADD in flight',
    intent: podGone(),
    held: [alloc({ podUID: UID, netns: GONE, createdAt: T + 11 })],
    observed: { ...seen(), now: at(T + 5_000) },
    action: { kind: 'drop', reason: 'what is held was allocated after the pod was seen gone', forgetExited: false },
  },
  {
    name: 'pod gone holding nothing (its DEL came): dropped',
    intent: podGone(),
    held: [],
    action: { kind: 'drop', reason: 'nothing is held', forgetExited: false },
  },
  // A runtime adapter's word counts only for the allocations it answers for (their namespace path).
  {
    name: "an adapter's container delete releases only the attachments under its namespace prefixes",
    intent: { kind: 'container-deleted', containerID: 'c1', observedAt: SEEN, via: PODMAN },
    held: [
      alloc({ netns: PODMAN_NS }),
      alloc({ ifname: 'net1', address: '10.0.1.2', netns: '/var/run/netns/cni-1234' }),
    ],
    action: { kind: 'release', owners: [{ owner, createdAtOrBefore: SEEN }], why: 'container deleted' },
  },
  {
    name: "an adapter's container delete of a container it does not answer for (another runtime's, or no namespace recorded): dropped",
    intent: { kind: 'container-deleted', containerID: 'c1', observedAt: SEEN, via: PODMAN },
    held: [
      alloc({ netns: '/var/run/netns/cni-1234' }),
      alloc({ ifname: 'net1', address: '10.0.1.2', netns: undefined }),
    ],
    action: { kind: 'drop', reason: 'nothing is held', forgetExited: true },
  },
  {
    name: "an adapter's resync absence releases its own allocations of the container and leaves another runtime's",
    intent: { kind: 'absent-at-resync', containerID: 'c1', observedAt: at(T + 20), cutoff: at(T), via: PODMAN },
    held: [alloc({ netns: PODMAN_NS }), alloc({ ifname: 'net1', address: '10.0.1.2', netns: THERE })],
    action: {
      kind: 'release',
      owners: [{ owner, createdAtOrBefore: at(T + 20) }],
      why: 'container gone when podman was resynchronised',
    },
  },
  {
    name: "an adapter's container delete never frees an allocation whose namespace is still there: it waits for the namespace to go",
    intent: { kind: 'container-deleted', containerID: 'c1', observedAt: SEEN, via: PODMAN },
    held: [
      alloc({ netns: PODMAN_NS }),
      alloc({ ifname: 'net1', address: '10.0.1.2', netns: `${PODMAN.netnsPrefixes[0]}gone` }),
    ],
    observed: {
      exited: false,
      namespaces: new Map([
        [PODMAN_NS, { kind: 'exists' }],
        [`${PODMAN.netnsPrefixes[0]}gone`, { kind: 'gone' }],
      ]),
      boot: BOOT,
    },
    action: {
      kind: 'wait-for-namespace',
      owners: [{ owner: { ...owner, ifname: 'net1' }, createdAtOrBefore: SEEN }],
      why: 'container deleted; its network namespace is still there',
      waitingFor: PODMAN_NS,
    },
  },
  {
    name: "an adapter's resync absence never frees an allocation whose namespace is still there (an adapter that lists nothing)",
    intent: { kind: 'absent-at-resync', containerID: 'c1', observedAt: SEEN, cutoff: at(T), via: PODMAN },
    held: [alloc({ netns: PODMAN_NS })],
    observed: { exited: false, namespaces: new Map([[PODMAN_NS, { kind: 'exists' }]]), boot: BOOT },
    action: {
      kind: 'wait-for-namespace',
      owners: [],
      why: 'container gone when podman was resynchronised; its network namespace is still there',
      waitingFor: PODMAN_NS,
    },
  },
  {
    name: "containerd's own container delete still releases at once: its word is the runtime's record gone",
    intent: { kind: 'container-deleted', containerID: 'c1', observedAt: SEEN },
    held: [alloc({ netns: THERE })],
    observed: { exited: false, namespaces, boot: BOOT },
    action: { kind: 'release', owners: [{ owner, createdAtOrBefore: SEEN }], why: 'container deleted' },
  },
  {
    name: "an adapter's exit with the namespace still there: waits for it, like containerd's",
    intent: { kind: 'task-exited', containerID: 'c1', event: 'task-exit', observedAt: SEEN, via: PODMAN },
    held: [alloc({ netns: PODMAN_NS })],
    observed: { exited: false, namespaces: new Map([[PODMAN_NS, { kind: 'exists' }]]), boot: BOOT },
    action: { kind: 'wait-for-namespace', owners: [], why: EXITED_WHY, waitingFor: PODMAN_NS },
  },
];

describe('the release rule', () => {
  for (const row of TABLE) {
    it(row.name, () => {
      assert.deepEqual(decide(row.intent, row.held, row.observed ?? seen()), row.action);
    });
  }

  it('keys owner intents by owner, container intents by container and pod intents by pod UID, and looks at namespaces only where it decides by them', () => {
    const kinds = new Map(TABLE.map((r) => [r.intent.kind, r.intent]));
    assert.deepEqual([...kinds.keys()].sort(), [
      'absent-at-resync',
      'container-deleted',
      'journal-del',
      'namespace-recheck',
      'netns-gone',
      'pod-gone',
      'task-exited',
    ]);
    for (const [kind, intent] of kinds) {
      const expected =
        kind === 'journal-del' || kind === 'netns-gone' ? 'owner' : kind === 'pod-gone' ? 'pod' : 'container';
      assert.equal(addressHolderOf(intent).kind, expected, kind);
      const onAdapterWord =
        (kind === 'container-deleted' || kind === 'absent-at-resync') && 'via' in intent && intent.via !== undefined;
      assert.equal(
        needsNamespaces(intent),
        ['task-exited', 'namespace-recheck', 'netns-gone', 'pod-gone'].includes(kind) || onAdapterWord,
        kind,
      );
    }
  });
});

/**
 * The auditor's look at the kubernetes store's objects (store.ts `auditCluster`), read straight
 * from the fake API server's storage as `etcdctl get` would read a real one's (never through an
 * agent): every address a live sandbox holds lies in a block its node claims, or one offered to it
 * or taken over by it, or it is listed in one of its node's publications (a borrower's loan ledger).
 * An address in a block another node claims, with none of these, is how a duplicate begins.
 *
 * The cluster lags a node's file by design (a claim is written before the ADD is answered, but a
 * handover moves the claim and a loan is published a moment after the ADD), so a sandbox is
 * reported only when its address stays in another node's block for PERSIST_MS while the API
 * server ran and no restore was being recovered from; an address in no claimed block is not judged
 * (after a block deleted by hand, its owner claims it again when it next reads the cluster).
 */
import type { BlockClaim, PublishedBlock } from '../../src/store/cluster.ts';
import { claimOfObject, publishedOf } from '../../src/store/kubernetes/objects.ts';
import type { FakeKubeApi } from '../helpers/fake-kube-api.ts';
import type { GroundTruth } from './ground-truth.ts';

/** How long an address must stay in another node's block to be reported (ms). */
const PERSIST_MS = 10_000;

function ipv4(text: string): number {
  return text.split('.').reduce((n, part) => n * 256 + Number(part), 0);
}

/** Whether `address` lies in `cidr` (IPv4, the soak's ranges). */
export function cidrContains(cidr: string, address: string): boolean {
  const [base, bits] = cidr.split('/');
  const size = 2 ** (32 - Number(bits));
  const start = ipv4(base as string);
  const at = ipv4(address);
  return at >= start && at < start + size;
}

/** The CIDR of a block key `<range pool>#<block CIDR>`. */
function cidrOfKey(key: string): string {
  return key.slice(key.lastIndexOf('#') + 1);
}

export class KubeClusterAudit {
  readonly #api: FakeKubeApi;
  /** Node names by index (soak-node.ts names them). */
  readonly #nodeName: (index: number) => string;
  /** Sandbox ID → when its address was first seen in another node's block (this stretch). */
  readonly #suspect = new Map<string, number>();

  constructor(api: FakeKubeApi, nodeName: (index: number) => string) {
    this.#api = api;
    this.#nodeName = nodeName;
  }

  claims(): BlockClaim[] {
    return this.#api.objects('warrenblocks').flatMap((o) => claimOfObject(o) ?? []);
  }

  publications(): PublishedBlock[] {
    return this.#api.objects('warrenblockpublications').flatMap((o) => publishedOf(o) ?? []);
  }

  /**
   * One look at `now`. `calmSince`: since when the API server has run with no restore to recover
   * from; a suspicion counts only from then. Returns the violations found now, keyed.
   */
  look(truth: GroundTruth, calmSince: number | undefined, now = Date.now()): Array<{ key: string; what: string }> {
    if (calmSince === undefined) {
      this.#suspect.clear();
      return [];
    }
    const claims = this.claims();
    const published = this.publications();
    const found: Array<{ key: string; what: string }> = [];
    const seen = new Set<string>();
    for (const s of truth.all()) {
      if (s.state !== 'live' || s.address === undefined || s.returning === true) continue;
      const node = this.#nodeName(s.node);
      const address = s.address;
      const claim = claims.find((c) => cidrContains(cidrOfKey(c.key), address));
      if (claim === undefined || claim.node === node || claim.offeredTo === node || claim.takenFrom === node) continue;
      const listed = published.some((p) => p.node === node && p.allocations.some((a) => a.address === address));
      if (listed) continue;
      seen.add(s.id);
      const since = Math.max(this.#suspect.get(s.id) ?? now, calmSince);
      this.#suspect.set(s.id, this.#suspect.get(s.id) ?? now);
      if (now - since >= PERSIST_MS)
        found.push({
          key: `foreign ${s.id}`,
          what: `${node}: live sandbox ${s.id}'s ${address} lies in block ${claim.key} claimed by ${claim.node} (not offered to, nor lent to ${node}) for ${now - since} ms`,
        });
    }
    for (const id of this.#suspect.keys()) if (!seen.has(id)) this.#suspect.delete(id);
    return found;
  }

  /** The containers whose allocations `node`'s publications list (its blocks and its loans). */
  publishedContainers(node: string): Set<string> {
    const ids = new Set<string>();
    for (const p of this.publications()) if (p.node === node) for (const a of p.allocations) ids.add(a.containerID);
    return ids;
  }
}

/**
 * `bin/warren migrate whereabouts` against the fake API server preloaded with whereabouts' own
 * objects (test/fixtures/whereabouts/cluster/: IPPools, OverlappingRangeIPReservations,
 * NetworkAttachmentDefinitions, their CRDs, and the pods), Warren's CRDs (deploy/crds/) beside
 * them: `--dry-run` prints the plan and writes nothing (checked in the fake's objects and in the
 * requests it answered); the real run records each live pod's address as a grant in the
 * WarrenAddressRequest of its range and node; a second run records nothing twice; an address
 * Warren already granted someone else is reported as a conflict, exit 1, and left alone.
 *
 * What follows the migration (agents adopting the grants, no ADD ever handing out a migrated
 * address while its pod lives, the pod's deletion releasing it) needs the agents' borrowing side
 * and belongs to the three-agent tests of issue 26.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../../src/core/clock.ts';
import { loadKubeConfig } from '../../src/sources/kubernetes/kubeconfig.ts';
import { openKubeTier } from '../../src/store/kubernetes/tier.ts';
import { type FakeKubeApi, type KubeObject, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { CHILD_PATH, WARREN_BIN, run } from '../helpers/processes.ts';
import { EXPECTED_OUTCOMES, loadWhereaboutsCluster, whereaboutsCrds } from '../helpers/whereabouts-cluster.ts';

/** Warren's namespace in these tests (Leases; the migration takes none). */
const NAMESPACE = 'warren-e2e-migrate';
const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

interface Report {
  dryRun: boolean;
  ranges: Array<{ pool: string; entries: Array<{ address: string; pod?: string; node?: string; outcome: string }> }>;
  problems: unknown[];
  counts: Record<string, number>;
}

/** A fake API server serving Warren's CRDs and whereabouts', holding the fixtures' objects. */
async function whereaboutsCluster(): Promise<FakeKubeApi> {
  const fake = await startFakeKubeApi({ crds: 'deploy' });
  for (const crd of whereaboutsCrds()) fake.registerCrd(crd as never);
  const cluster = loadWhereaboutsCluster();
  fake.preload('network-attachment-definitions', cluster.definitions.items as KubeObject[]);
  fake.preload('ippools', cluster.ipPools.items as KubeObject[]);
  fake.preload('overlappingrangeipreservations', cluster.reservations.items as KubeObject[]);
  for (const pod of cluster.pods.items) fake.createPod(pod as KubeObject);
  return fake;
}

async function migrate(fake: FakeKubeApi, ...flags: string[]) {
  const r = await run(
    process.execPath,
    [WARREN_BIN, 'migrate', 'whereabouts', '--kubeconfig', fake.kubeconfigPath, '--namespace', NAMESPACE, ...flags],
    { env: { PATH: CHILD_PATH } },
  );
  return { ...r, report: flags.includes('--json') ? (JSON.parse(r.stdout) as Report) : undefined };
}

/** The grants of every WarrenAddressRequest, as `pool node address lender`. */
function grantsIn(fake: FakeKubeApi): string[] {
  return fake
    .objects('warrenaddressrequests')
    .flatMap((o) => {
      const spec = o.spec as { pool: string; node: string; grants?: Array<{ address: string; lender: string }> };
      return (spec.grants ?? []).map((g) => `${spec.pool} ${spec.node} ${g.address} ${g.lender}`);
    })
    .sort();
}

const RECORDED = EXPECTED_OUTCOMES.filter((o) => o.outcome === 'recorded')
  .map((o) => `${o.pool} ${o.node} ${o.address} whereabouts`)
  .sort();

describe('warren migrate whereabouts (fake API server)', () => {
  let fake: FakeKubeApi;
  before(async () => {
    fake = await whereaboutsCluster();
  });
  after(async () => {
    await fake?.stop();
  });

  it('--dry-run prints the plan and writes nothing', async () => {
    fake.clearRequests();
    const text = await migrate(fake, '--dry-run');
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /dry run: nothing is written/);
    assert.match(text.stdout, /range 192\.168\.2\.224\/28\n/);
    assert.match(text.stdout, /192\.168\.2\.225 +default\/web-0 +node-a +would record/);
    assert.match(text.stdout, /192\.168\.2\.226 +default\/web-1 +- +not migrated \(pod gone\)/);
    const json = await migrate(fake, '--dry-run', '--json');
    assert.equal(json.code, 0, json.stderr);
    assert.equal(json.report?.counts.record, RECORDED.length);
    assert.deepEqual(grantsIn(fake), []);
    const writes = fake.requests.filter((r) => WRITES.has(r.method));
    assert.deepEqual(writes, [], 'a dry run made no write request');
  });

  it('records each live pod’s address as a grant of its range and node', async () => {
    const r = await migrate(fake, '--json');
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.report?.counts.recorded, RECORDED.length);
    assert.deepEqual(r.report?.problems, []);
    assert.deepEqual(grantsIn(fake), RECORDED);
    // The holder carries the pod's UID as the API server gave it.
    const web0 = fake.getPod('default', 'web-0');
    const request = fake
      .objects('warrenaddressrequests')
      .find(
        (o) =>
          (o.spec as { pool: string; node: string }).pool === '192.168.2.224/28' &&
          (o.spec as { node: string }).node === 'node-a',
      );
    assert.ok(request !== undefined, 'a request of node-a for 192.168.2.224/28');
    const grant = (request.spec as { grants: Array<{ holder: Record<string, unknown> }> }).grants[0];
    assert.equal(grant?.holder.podUID, web0?.metadata.uid);
    assert.equal(grant?.holder.network, 'macvlan-a');
  });

  it('a second run records nothing twice', async () => {
    const before = fake.objects('warrenaddressrequests').map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`);
    fake.clearRequests();
    const r = await migrate(fake, '--json');
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.report?.counts['already-recorded'], RECORDED.length);
    assert.equal(r.report?.counts.recorded, 0);
    assert.deepEqual(
      fake.objects('warrenaddressrequests').map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`),
      before,
    );
    assert.deepEqual(
      fake.requests.filter((q) => WRITES.has(q.method)),
      [],
    );
  });
});

describe('warren migrate whereabouts: an address Warren gave someone else', () => {
  let fake: FakeKubeApi;
  before(async () => {
    fake = await whereaboutsCluster();
  });
  after(async () => {
    await fake?.stop();
  });

  it('is reported as a conflict, exit 1, and left as it was', async () => {
    const tier = await openKubeTier({
      kubeConfig: loadKubeConfig(fake.kubeconfigPath),
      namespace: NAMESPACE,
      leaseSeconds: 15,
      clock: new ManualClock(Date.now()),
    });
    try {
      // node-y owns a block of the range and lent 10.40.0.7 of it to node-z.
      const range = {
        pool: '10.40.0.0/24',
        space: 'space:v4:',
        subnet: '10.40.0.0/24',
        first: '10.40.0.1',
        last: '10.40.0.254',
        blockPrefix: 26,
      };
      await tier.pinRange(range);
      const block = await tier.claim(range, '10.40.0.0/24#10.40.0.0/26', 'node-y');
      assert.ok(block !== undefined);
      const asked = await tier.ask('10.40.0.0/24', 'node-z', 0);
      const theirs = { address: '10.40.0.7', lender: 'node-y', block: block.key };
      assert.ok(await tier.updateRequest(asked, [theirs], 0));
      const r = await migrate(fake);
      assert.equal(r.code, 1, r.stdout);
      assert.match(
        r.stdout,
        /10\.40\.0\.7 +default\/legacy-0 +node-a +CONFLICT: already granted by node-y to node node-z/,
      );
      assert.match(r.stdout, /do not switch the definitions/);
      assert.deepEqual((await tier.requestOf('10.40.0.0/24', 'node-z'))?.grants, [theirs]);
      assert.equal((await tier.requestOf('10.40.0.0/24', 'node-a'))?.grants.length ?? 0, 0);
      // Everything else was recorded all the same.
      assert.deepEqual(
        grantsIn(fake).filter((g) => g.endsWith(' whereabouts')),
        RECORDED.filter((g) => !g.includes(' 10.40.0.7 ')),
      );
    } finally {
      await tier.close();
    }
  });
});

/**
 * Cluster-wide reservations and the address a pod asks for, end to end: a real agent on store
 * `kubernetes` against the fake API server (the real wire), WarrenReservation objects written
 * through the API as an operator's kubectl would, pods with the `warren.dev/addresses` annotation,
 * and ADD and DEL through the installed plugin.
 *
 * - a reservation over a free address: never handed out, on a small range exhausted around it;
 * - a reservation over a live address: the holder keeps it, the reservation's status lists it as
 *   in use on the node, and once released it is never handed out;
 * - a requested reserved address (CNI_ARGS IP=, the annotation) is refused with code 7 naming the
 *   reservation; the annotation's address is honoured, or refused naming why;
 * - `warren reservations` lists them with the ranges they cover and where they are in use, and
 *   `warren doctor` flags one that holds a whole range back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CNI_CODES } from '../../src/cni/errors.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import { loadKubeConfig } from '../../src/sources/kubernetes/kubeconfig.ts';
import { KubeApiClient } from '../../src/store/kubernetes/api-client.ts';
import type { AgentHandle } from '../helpers/agent.ts';
import { type CniReply, resultAddresses, warren } from '../helpers/cni.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { networkConfig, startKubeNode } from '../helpers/kube-store.ts';
import { WARREN_BIN, run, waitFor } from '../helpers/processes.ts';

const NODE = 'kr1';
const RESERVATIONS = '/apis/warren.dev/v1alpha1/warrenreservations';

describe('reservations and requested addresses through the Kubernetes API', () => {
  let api: FakeKubeApi;
  let client: KubeApiClient;
  let agent: AgentHandle;

  /** ADD of container `id` on `network`, for pod `pod` (its namespace default) when named. */
  const add = (network: string, ipam: Record<string, unknown>, id: string, o: { pod?: string; ip?: string } = {}) =>
    warren({
      command: 'ADD',
      containerID: id,
      netns: `/var/run/netns/${id}`,
      ifname: 'eth0',
      config: networkConfig(agent, network, ipam),
      ...(o.pod === undefined && o.ip === undefined
        ? {}
        : {
            args: [
              ...(o.pod === undefined
                ? []
                : [`K8S_POD_NAMESPACE=default`, `K8S_POD_NAME=${o.pod}`, `K8S_POD_UID=uid-${o.pod}`]),
              ...(o.ip === undefined ? [] : [`IP=${o.ip}`]),
            ].join(';'),
          }),
    });
  const del = (network: string, ipam: Record<string, unknown>, id: string) =>
    warren({ command: 'DEL', containerID: id, ifname: 'eth0', config: networkConfig(agent, network, ipam) });

  /** Creates a reservation as an operator does, and waits until the agent watches it. */
  const reserve = async (name: string, addresses: string[], reason?: string) => {
    const answer = await client.send('a reservation', {
      method: 'POST',
      path: RESERVATIONS,
      body: {
        apiVersion: 'warren.dev/v1alpha1',
        kind: 'WarrenReservation',
        metadata: { name },
        spec: { addresses, ...(reason === undefined ? {} : { reason }) },
      },
    });
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    await waitFor(`the agent to watch reservation ${name}`, async () => {
      const status = (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/status' })).body as {
        kubernetes?: { reservations?: { reservations: number } };
      };
      return (status.kubernetes?.reservations?.reservations ?? 0) >= watched + 1 ? true : undefined;
    });
    watched += 1;
  };
  let watched = 0;

  /** A pod of this node, annotated with `addresses` when given. */
  const pod = (name: string, addresses?: string) =>
    api.createPod({
      metadata: {
        name,
        namespace: 'default',
        uid: `uid-${name}`,
        ...(addresses === undefined ? {} : { annotations: { 'warren.dev/addresses': addresses } }),
      },
      spec: { nodeName: NODE, containers: [] },
    });

  /** ADDs until one fails: the addresses handed out and the failure. */
  const exhaust = async (network: string, ipam: Record<string, unknown>, tag: string) => {
    const got: string[] = [];
    for (let i = 0; i < 300; i++) {
      const reply = await add(network, ipam, `${tag}-${i}`);
      if (reply.code !== 0) return { got, failure: reply };
      got.push(...resultAddresses(reply));
    }
    assert.fail('the range never filled');
  };

  const refusedWith = (reply: CniReply, code: number, pattern: RegExp) => {
    assert.equal(reply.code, 1, reply.stdout);
    assert.equal(reply.json?.code, code, reply.stdout);
    assert.match(String(reply.json?.msg), pattern);
  };

  before(async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
    client = await KubeApiClient.open({ kubeConfig: loadKubeConfig(api.kubeconfigPath) });
    agent = await startKubeNode(api, NODE);
  });
  after(async () => {
    await agent?.kill();
    client?.close();
    await api?.stop();
  });

  it('never hands out a free reserved address, even on a small range exhausted around it', async () => {
    await reserve('spare', ['10.251.0.3'], 'kept for the router');
    const ipam = { range: '10.251.0.0/29' };
    const { got, failure } = await exhaust('free', ipam, 'f');
    assert.deepEqual(got.sort(), ['10.251.0.1', '10.251.0.2', '10.251.0.4', '10.251.0.5', '10.251.0.6']);
    refusedWith(failure, CNI_CODES.POOL_EXHAUSTED, /WarrenReservation "spare" \(kept for the router\)/);
  });

  it('keeps a live address a reservation covers, lists it in the status, and never hands it out after its release', async () => {
    const ipam = { range: '10.251.1.0/29' };
    const first = await add('live', ipam, 'holder');
    const [live] = resultAddresses(first);
    assert.ok(live, first.stdout);
    await reserve('over-live', [`${live}/32`]);
    const again = await add('live', ipam, 'holder');
    assert.deepEqual(resultAddresses(again), [live], 'a retried ADD keeps its address');
    const inUse = () =>
      (api.object('warrenreservations', 'over-live')?.status as { inUse?: Record<string, { addresses: unknown[] }> })
        ?.inUse;
    const listed = await waitFor('the status to list the address in use', () => inUse()?.[NODE]);
    assert.deepEqual(listed, {
      count: 1,
      addresses: [{ address: live, containerID: 'holder', network: 'live' }],
    });
    assert.equal((await del('live', ipam, 'holder')).code, 0);
    await waitFor('the status to say nothing is in use', () => (inUse()?.[NODE] === undefined ? true : undefined));
    const { got, failure } = await exhaust('live', ipam, 'l');
    assert.equal(got.length, 5, `every other address of the /29: ${got}`);
    assert.ok(!got.includes(live), `${live} is not handed out after its release`);
    assert.equal(failure.json?.code, CNI_CODES.POOL_EXHAUSTED, failure.stdout);
  });

  it('refuses a requested reserved address with code 7 naming the reservation, by IP= and by annotation', async () => {
    await reserve('vip', ['10.251.2.4/30'], 'the load balancer');
    const ipam = { range: '10.251.2.0/24' };
    refusedWith(
      await add('asked', ipam, 'by-arg', { ip: '10.251.2.5' }),
      CNI_CODES.INVALID_CONFIG,
      /10\.251\.2\.5 is reserved by WarrenReservation "vip" \(the load balancer\)/,
    );
    pod('web-0', '10.251.2.6');
    refusedWith(
      await add('asked', ipam, 'by-annotation', { pod: 'web-0' }),
      CNI_CODES.INVALID_CONFIG,
      /pod default\/web-0 asks \(annotation warren\.dev\/addresses\) for 10\.251\.2\.6, which is reserved by WarrenReservation "vip"/,
    );
  });

  it("honours the address a pod's annotation asks for, and refuses a taken, outside, excluded or malformed one", async () => {
    const ipam = { ipRanges: [{ range: '10.251.3.0/24', exclude: ['10.251.3.200/29'] }, { range: 'fd00:251::/120' }] };
    pod('db-0', '10.251.3.77, fd00:251::77');
    const honoured = await add('annotated', ipam, 'db-0', { pod: 'db-0' });
    assert.deepEqual(resultAddresses(honoured), ['10.251.3.77', 'fd00:251::77'], honoured.stdout);
    pod('db-1', JSON.stringify({ annotated: ['10.251.3.77'], other: ['192.0.2.1'] }));
    refusedWith(
      await add('annotated', ipam, 'db-1', { pod: 'db-1' }),
      CNI_CODES.ADDRESS_UNAVAILABLE,
      /10\.251\.3\.77 is already allocated in .*\(held by pod default\/db-0, container db-0 eth0 of network annotated\)/,
    );
    pod('db-2', '10.9.9.9');
    refusedWith(
      await add('annotated', ipam, 'db-2', { pod: 'db-2' }),
      CNI_CODES.INVALID_CONFIG,
      /for 10\.9\.9\.9, which is outside every range of the network/,
    );
    pod('db-4', '10.251.3.201');
    refusedWith(
      await add('annotated', ipam, 'db-4', { pod: 'db-4' }),
      CNI_CODES.INVALID_CONFIG,
      /for 10\.251\.3\.201, which is excluded from /,
    );
    pod('db-3', '10.251.3.x');
    refusedWith(
      await add('annotated', ipam, 'db-3', { pod: 'db-3' }),
      CNI_CODES.INVALID_CONFIG,
      /^pod default\/db-3: annotation warren\.dev\/addresses asks for "10\.251\.3\.x", which is not an IP address/,
    );
  });

  it('lists reservations with what they cover and where they are in use; doctor flags one over a whole range', async () => {
    const ipam = { range: '10.251.4.0/30' }; // .1 and .2
    const held = await add('whole', ipam, 'w-0');
    assert.deepEqual(resultAddresses(held), ['10.251.4.1'], held.stdout);
    await reserve('all-of-it', ['10.251.4.0/30'], 'decommissioned');
    const cli = (args: string[]) => run(process.execPath, [WARREN_BIN, ...args, '--socket', agent.socket]);
    const listed = await waitFor('the status to list 10.251.4.1 in use', async () => {
      const out = await cli(['reservations', '--json']);
      assert.equal(out.code, 0, out.stderr);
      const report = JSON.parse(out.stdout) as {
        reservations: Array<{ name: string; covers: unknown[]; inUse: Array<{ node: string }> }>;
      };
      const mine = report.reservations.find((r) => r.name === 'all-of-it');
      return mine?.inUse.length === 1 ? mine : undefined;
    });
    assert.deepEqual(listed.covers, [{ pool: '10.251.4.0/30', subnet: '10.251.4.0/30', reserved: '2', whole: true }]);
    assert.equal(listed.inUse[0]?.node, NODE);
    const table = await cli(['reservations']);
    assert.match(
      table.stdout,
      /all-of-it +10\.251\.4\.0\/30 +10\.251\.4\.0\/30: all +kr1: 10\.251\.4\.1 +decommissioned/,
    );
    const doctor = await cli(['doctor', '--json']);
    const findings = (JSON.parse(doctor.stdout) as { findings: Array<{ id: string; severity: string; title: string }> })
      .findings;
    const flagged = findings.filter((f) => f.id === 'reservation-covers-range');
    assert.deepEqual(
      flagged.map((f) => [f.severity, f.title]),
      [['error', 'WarrenReservation all-of-it holds back the whole range 10.251.4.0/30']],
    );
  });
});

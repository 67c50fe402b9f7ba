/**
 * The Multus quickstart's configs (docs/multus/), run as Multus runs them: the definitions and the
 * pods are objects of the fake API server; the config a pod's attachment gets is its definition's,
 * read back from the server; the real plugin is called with it as macvlan calls its IPAM plugin
 * (the whole config on stdin, the pod in CNI_ARGS as Multus sets it, interface net1), against two
 * real agents on the kubernetes store. Multus and macvlan themselves are not run (no Multus
 * here), and the agents listen on private sockets, so the test adds `socket` and `journal_dir` to
 * the definition's `ipam` (the docs' config names none: the default socket, one config for every
 * node). It holds the page's claims: Warren's definition is whereabouts' with only `ipam.type`
 * changed; two pods on two nodes get two addresses of the range; the network-status example is of
 * that definition and range; each message the page's table gives is how the plugin's own begins.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { AgentHandle } from '../helpers/agent.ts';
import { type CniReply, resultAddresses, warren } from '../helpers/cni.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { parseYaml } from '../helpers/fake-kube-api/crds.ts';
import type { CrdObject, KubeObject } from '../helpers/fake-kube-api/types.ts';
import { startKubeNode } from '../helpers/kube-store.ts';
import { REPO, tempDir } from '../helpers/processes.ts';
import { whereaboutsCrds } from '../helpers/whereabouts-cluster.ts';
import { codeSpans, tableColumn } from '../docs/doc-tables.ts';

const DOCS = join(REPO, 'docs');
const NAD_PLURAL = 'network-attachment-definitions';
/** The range of the docs' definition, host bits masked: what it hands out. */
const FIRST = 225;
const LAST = 238;

const doc = (file: string): string => readFileSync(join(DOCS, 'multus', file), 'utf8');
const yamlDoc = (file: string): KubeObject => parseYaml(doc(file)) as KubeObject;
const configOf = (nad: KubeObject): Record<string, unknown> =>
  JSON.parse(String((nad.spec as { config: string }).config)) as Record<string, unknown>;

describe('the Multus quickstart (docs/multus.md), through the real plugin and agents', () => {
  let api: FakeKubeApi;
  const agents: AgentHandle[] = [];
  const pods = new Map<string, { uid: string; node: number }>();

  before(async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
    const nadCrd = whereaboutsCrds().find((c) => c.metadata.name === `${NAD_PLURAL}.k8s.cni.cncf.io`);
    assert.ok(nadCrd, "Multus' NetworkAttachmentDefinition CRD among the fixtures");
    api.registerCrd(nadCrd as unknown as CrdObject);
    api.establishCrds();
    // The cluster after the switch: Warren's definition in place of whereabouts'.
    api.preload(NAD_PLURAL, [yamlDoc('warren-nad.yaml')]);
    for (const node of ['mq-1', 'mq-2']) agents.push(await startKubeNode(api, node));
    const pod = yamlDoc('pod.yaml');
    for (const [i, name] of ['samplepod-a', 'samplepod-b'].entries()) {
      const made = api.createPod({
        ...pod,
        metadata: { ...pod.metadata, name },
        spec: { ...(pod.spec as object), nodeName: `mq-${i + 1}` },
      });
      pods.set(name, { uid: String(made.metadata.uid), node: i });
    }
  });
  after(async () => {
    for (const agent of agents) await agent.kill();
    await api?.stop();
  });

  /** The definition a pod's annotation names, as Multus reads it from the API server. */
  function definition(): Record<string, unknown> {
    const annotation = yamlDoc('pod.yaml').metadata.annotations?.['k8s.v1.cni.cncf.io/networks'];
    const nad = api.object(NAD_PLURAL, String(annotation), 'default');
    assert.ok(nad, `the definition ${annotation}`);
    return configOf(nad);
  }

  /** macvlan's call of its IPAM plugin for `pod`'s attachment: the definition's config, on `agent`. */
  function call(command: 'ADD' | 'DEL', pod: string, config = definition(), agent?: AgentHandle): Promise<CniReply> {
    const facts = pods.get(pod) ?? { uid: 'no-such-uid', node: 0 };
    const on = agent ?? (agents[facts.node] as AgentHandle);
    const ipam = { ...(config.ipam as object), socket: on.socket, journal_dir: join(on.dir, 'journal') };
    const containerID = `${pod}`.padEnd(64, '0');
    return warren({
      command,
      containerID,
      netns: `/var/run/netns/${pod}`,
      ifname: 'net1',
      args: `IgnoreUnknown=true;K8S_POD_NAMESPACE=default;K8S_POD_NAME=${pod};K8S_POD_INFRA_CONTAINER_ID=${containerID};K8S_POD_UID=${facts.uid}`,
      config: { ...config, ipam },
    });
  }

  const inRange = (address: string): boolean => {
    const m = /^192\.168\.2\.(\d+)$/.exec(address);
    return m !== null && Number(m[1]) >= FIRST && Number(m[1]) <= LAST;
  };

  it("Warren's definition is whereabouts' with only ipam.type changed, and names no socket", () => {
    const [before, after] = [configOf(yamlDoc('whereabouts-nad.yaml')), configOf(yamlDoc('warren-nad.yaml'))];
    assert.equal((before.ipam as { type: string }).type, 'whereabouts');
    assert.equal((after.ipam as { type: string }).type, 'warren');
    assert.deepEqual(after, { ...before, ipam: { ...(before.ipam as object), type: 'warren' } });
    assert.equal((after.ipam as { socket?: string }).socket, undefined, 'one definition for every node');
    assert.deepEqual(yamlDoc('warren-nad.yaml').metadata, yamlDoc('whereabouts-nad.yaml').metadata);
  });

  it('gives two pods on two nodes two addresses of the range, each held for its pod, and takes them back at DEL', async () => {
    const got: string[] = [];
    for (const pod of ['samplepod-a', 'samplepod-b']) {
      const added = await call('ADD', pod);
      assert.equal(added.code, 0, added.stdout + added.stderr);
      const [address] = resultAddresses(added);
      assert.ok(address !== undefined && inRange(address), `${pod}: ${added.stdout}`);
      got.push(address);
      const facts = pods.get(pod);
      const held = (await (agents[facts?.node ?? 0] as AgentHandle).allocations()).filter((a) => a.address === address);
      assert.deepEqual(
        held.map((a) => [a.podNamespace, a.podName, a.podUID, a.ifname]),
        [['default', pod, facts?.uid, 'net1']],
        'recorded with the pod Multus named, so its deletion releases it',
      );
    }
    assert.notEqual(got[0], got[1]);
    for (const pod of ['samplepod-a', 'samplepod-b']) assert.equal((await call('DEL', pod)).code, 0);
    for (const agent of agents) assert.deepEqual(await agent.allocations(), []);
  });

  it("shows, in the page's network-status example, this definition's attachment with an address of its range", () => {
    const status = JSON.parse(doc('network-status.json')) as Array<{ name: string; interface: string; ips: string[] }>;
    const attachment = status.find((s) => s.name === 'default/macvlan-conf');
    assert.equal(attachment?.interface, 'net1');
    assert.ok(attachment?.ips.every(inRange), JSON.stringify(attachment));
  });

  it("begins each message the page's table gives as the plugin's own begins (Multus keeps the message, not the code)", async () => {
    const page = readFileSync(join(DOCS, 'multus.md'), 'utf8');
    const table = page.slice(page.indexOf('| cause |'));
    const said = tableColumn(table, 2).map((cell) => codeSpans(cell)[0] ?? '');
    const codes = tableColumn(table, 1).map(Number);
    assert.equal(said.length, 3, `the table: ${said.join(' | ')}`);
    const begins = (text: string) =>
      new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/<[^>]+>/g, '.+?')}`);

    // The range full: every address on one node or the other, then one more.
    const filled: string[] = [];
    for (let i = 0; filled.length < LAST - FIRST + 1 && i < 40; i++) {
      const reply = await call('ADD', `fill-${i}`, definition(), agents[i % 2]);
      if (reply.code === 0) filled.push(...resultAddresses(reply));
    }
    assert.equal(new Set(filled).size, LAST - FIRST + 1, `the whole range handed out once: ${filled.join(' ')}`);
    const full = await call('ADD', 'one-too-many', definition(), agents[0]);
    // No agent: a socket where none listens.
    const config = definition();
    const nowhere = join(tempDir('warren-multus-'), 'warren.sock');
    const unreachable = await warren({
      command: 'ADD',
      containerID: 'u'.repeat(64),
      netns: '/var/run/netns/unreachable',
      ifname: 'net1',
      config: { ...config, ipam: { ...(config.ipam as object), socket: nowhere } },
    });
    // A wrong key: a range that is no subnet.
    const wrong = await call('ADD', 'wrong', {
      ...config,
      ipam: { ...(config.ipam as object), range: '192.168.2.225/33' },
    });

    for (const [i, reply] of [full, unreachable, wrong].entries()) {
      assert.notEqual(reply.code, 0);
      assert.equal(reply.json?.code, codes[i], reply.stdout);
      assert.match(String(reply.json?.msg), begins(said[i] as string), reply.stdout);
    }
  });
});

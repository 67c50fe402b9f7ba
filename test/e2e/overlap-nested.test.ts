/**
 * Nested ranges of one network_name served as whereabouts serves them (issue 37, item 2): a /24
 * and a /26 inside it, on two network configs (two CNI names, one `ipam.network_name`), filled
 * concurrently to exhaustion through the real plugin executable and real agents:
 * - on the kubernetes store (the fake API server), two agents as two nodes, ADDs of both configs
 *   interleaved on both nodes at once;
 * - on SQLite (the agent's default store), one agent, the same; and the /26 filled first, then
 *   refused as full while the /24 still has room elsewhere, then the /24 filled around it;
 * - with `enable_overlapping_ranges: false` on the /26 (SQLite): whereabouts' meaning, the /26 is
 *   a pool of its own, not checked against the /24, so it is served where the /24 is full.
 * What each proves: every usable address of the /24 (.1-.254) handed out exactly once across both
 * configs, every /26 address inside the /26's own usable span (.65-.126: its network and
 * broadcast addresses are left out, as whereabouts leaves them; the /24 may hand them out), every
 * further ADD of either config refused as full (CNI code 100), and the agents' stored allocations
 * agreeing (each address held once, by the container it was handed to).
 *
 * The fill never waits on time: workers call ADD back to back, a bounded number at once per node,
 * each stopping on a config once its node refused it as full; then rounds of one ADD per node and
 * config until a round hands out nothing, since on the kubernetes store a node may refuse as full
 * while another node's block, busy with its own ADDs, had not lent it an address yet. Every step is
 * bounded by a deadline; any other refusal stops the fill and is reported with its message.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { LENT_NETWORK } from '../../src/allocator/lending/loans.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses } from '../helpers/cni.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { cniCall, startKubeNode } from '../helpers/kube-store.ts';

/** The CNI code of an ADD refused because its range has no free address (docs/multus.md's table). */
const FULL = 100;
/** ADDs one node runs at once while filling. */
const PER_NODE = 8;
/** The whole fill, workers and rounds: far above what it takes on a loaded machine. */
const FILL_DEADLINE_MS = 240_000;
const TEST_TIMEOUT_MS = FILL_DEADLINE_MS + 60_000;

/** One network config: its CNI `name` and its `ipam` keys (socket and journal added per agent). */
interface Network {
  readonly name: string;
  readonly ipam: Record<string, unknown>;
}

/** The /24 and the /26 inside it on two configs of one network_name, in `prefix` (e.g. "10.232.40"). */
function nestedNetworks(prefix: string, narrowExtra: Record<string, unknown> = {}): [Network, Network] {
  const network_name = `net-nested-${prefix.split('.')[2]}`;
  return [
    { name: 'nested-wide', ipam: { range: `${prefix}.0/24`, network_name } },
    { name: 'nested-narrow', ipam: { range: `${prefix}.64/26`, network_name, ...narrowExtra } },
  ];
}

/** Every usable address of `prefix`.0/24 whose last octet is in [first, last]. */
function addressesOf(prefix: string, first = 1, last = 254): string[] {
  return Array.from({ length: last - first + 1 }, (_, i) => `${prefix}.${first + i}`);
}

const lastOctet = (address: string): number => Number(address.split('.')[3]);
const byAddress = (a: string, b: string): number => {
  const [x, y] = [a.split('.').map(Number), b.split('.').map(Number)];
  for (let i = 0; i < 4; i++) if (x[i] !== y[i]) return (x[i] ?? 0) - (y[i] ?? 0);
  return 0;
};

/** An address handed out: to which container, on which config, by which node. */
interface Handed {
  readonly address: string;
  readonly network: string;
  readonly id: string;
  readonly node: number;
}

interface Fill {
  readonly handed: Handed[];
  /** The last refusal of each node and config, all FULL when the fill ended as it should. */
  readonly lastRefusals: Array<{ node: number; network: string; code: unknown; msg: string }>;
}

/**
 * Fills `networks` on `agents` to exhaustion (see the header): throws, naming the call, on any
 * refusal other than FULL, on an ADD that hands out other than one address, or at the deadline.
 */
async function fillToExhaustion(
  agents: readonly AgentHandle[],
  networks: readonly Network[],
  tag: string,
): Promise<Fill> {
  const deadline = Date.now() + FILL_DEADLINE_MS;
  const handed: Handed[] = [];
  let calls = 0;
  let stop: Error | undefined;

  /** One ADD: the address handed out, or its refusal as full; any other refusal stops the fill. */
  const add = async (node: number, network: Network): Promise<string | { code: unknown; msg: string }> => {
    if (Date.now() > deadline)
      throw new Error(`${tag}: not filled within ${FILL_DEADLINE_MS} ms (${handed.length} handed out)`);
    const id = `${tag}-${calls++}`;
    const reply = await cniCall('ADD', agents[node] as AgentHandle, network.name, network.ipam, id);
    if (reply.code === 0) {
      const addresses = resultAddresses(reply);
      if (addresses.length !== 1)
        throw new Error(`ADD ${id} (${network.name}) handed out ${addresses.length} addresses: ${reply.stdout}`);
      const [address] = addresses as [string];
      handed.push({ address, network: network.name, id, node });
      return address;
    }
    if (reply.json?.code === FULL) return { code: FULL, msg: String(reply.json?.msg) };
    throw new Error(
      `ADD ${id} of ${network.name} (${JSON.stringify(network.ipam)}) on node ${node} refused with code ` +
        `${String(reply.json?.code)}, not ${FULL} (full): ${String(reply.json?.msg ?? reply.stdout + reply.stderr)}`,
    );
  };

  // Workers: each node runs PER_NODE at once, alternating the configs its node has not refused as
  // full (a refusal ends that config for the node's other workers too: each costs a lend wait).
  const open = agents.map(() => new Set(networks.map((n) => n.name)));
  const worker = async (node: number, start: number): Promise<void> => {
    const nodeOpen = open[node] as Set<string>;
    for (let turn = start; nodeOpen.size > 0 && stop === undefined; turn++) {
      const choices = networks.filter((n) => nodeOpen.has(n.name));
      const network = choices[turn % choices.length] as Network;
      try {
        if (typeof (await add(node, network)) !== 'string') nodeOpen.delete(network.name);
      } catch (error) {
        stop ??= error as Error;
      }
    }
  };
  await Promise.all(agents.flatMap((_, node) => Array.from({ length: PER_NODE }, (_, w) => worker(node, w))));
  if (stop !== undefined) throw stop;

  // Rounds: one ADD per node and config at once, until a round hands out nothing.
  for (;;) {
    const round = await Promise.all(
      agents.flatMap((_, node) => networks.map(async (network) => ({ node, network, got: await add(node, network) }))),
    );
    if (round.every((r) => typeof r.got !== 'string')) {
      return {
        handed,
        lastRefusals: round.map((r) => ({
          node: r.node,
          network: r.network.name,
          ...(r.got as { code: unknown; msg: string }),
        })),
      };
    }
  }
}

/** The fill's addresses: each once, all of the /24's usable ones, the narrow config's in its own span. */
function assertWholeRangeOnce(fill: Fill, prefix: string, narrow: Network): void {
  const addresses = fill.handed.map((h) => h.address);
  const twice = addresses.filter((a, i) => addresses.indexOf(a) !== i);
  assert.deepEqual(twice, [], 'no address handed out twice, across both configs and both nodes');
  assert.deepEqual([...addresses].sort(byAddress), addressesOf(prefix), `every usable address of ${prefix}.0/24, once`);
  const outside = fill.handed.filter(
    (h) => h.network === narrow.name && (lastOctet(h.address) < 65 || lastOctet(h.address) > 126),
  );
  assert.deepEqual(outside, [], `the /26's addresses are inside its usable span ${prefix}.65-${prefix}.126`);
  assert.ok(
    fill.handed.some((h) => h.network === narrow.name),
    'the /26 was served: its config handed out addresses too',
  );
  for (const refusal of fill.lastRefusals) {
    assert.equal(refusal.code, FULL, JSON.stringify(refusal));
    assert.match(refusal.msg, /has no free address/, JSON.stringify(refusal));
  }
}

/** The agents' stored allocations of `networks`: each address held once, by the container it was handed to. */
async function assertStoredAgree(
  agents: readonly AgentHandle[],
  networks: readonly Network[],
  handed: readonly Handed[],
) {
  const names = new Set(networks.map((n) => n.name));
  const stored = (await Promise.all(agents.map((a) => a.allocations())))
    .flat()
    .filter((a) => a.network !== LENT_NETWORK && names.has(a.network));
  const held = stored.map((a) => `${a.address} ${a.network} ${a.containerID}`).sort();
  const given = handed.map((h) => `${h.address} ${h.network} ${h.id}`).sort();
  assert.deepEqual(held, given, 'the stores hold exactly what was handed out, each address once');
}

describe('nested ranges of one network_name on the kubernetes store, two nodes', { timeout: TEST_TIMEOUT_MS }, () => {
  let api: FakeKubeApi;
  const agents: AgentHandle[] = [];

  before(async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
    for (const node of ['nest-1', 'nest-2']) agents.push(await startKubeNode(api, node));
  });
  after(async () => {
    for (const agent of agents) await agent.kill();
    await api?.stop();
  });

  it('hands out every address of the /24 exactly once across the /24 and the /26, both nodes filling at once', async () => {
    const prefix = '10.232.40';
    const networks = nestedNetworks(prefix);
    const fill = await fillToExhaustion(agents, networks, 'kube');
    assertWholeRangeOnce(fill, prefix, networks[1]);
    assert.deepEqual(
      [0, 1].map((node) => fill.handed.some((h) => h.node === node)),
      [true, true],
      'both nodes handed out addresses',
    );
    await assertStoredAgree(agents, networks, fill.handed);
  });
});

describe('nested ranges of one network_name on SQLite', { timeout: TEST_TIMEOUT_MS }, () => {
  const agents: AgentHandle[] = [];
  after(async () => {
    for (const agent of agents) await agent.kill();
  });

  it('hands out every address of the /24 exactly once across the /24 and the /26, filled at once', async () => {
    const agent = await startAgent();
    agents.push(agent);
    const prefix = '10.232.41';
    const networks = nestedNetworks(prefix);
    const fill = await fillToExhaustion([agent], networks, 'sqlite');
    assertWholeRangeOnce(fill, prefix, networks[1]);
    await assertStoredAgree([agent], networks, fill.handed);
  });

  it('refuses the /26 as full once its span is, while the /24 still has room, then fills the /24 around it', async () => {
    const agent = await startAgent();
    agents.push(agent);
    const prefix = '10.232.42';
    const networks = nestedNetworks(prefix);
    const [wide, narrow] = networks;
    const first = await fillToExhaustion([agent], [narrow], 'narrow-first');
    assert.deepEqual(
      first.handed.map((h) => h.address).sort(byAddress),
      addressesOf(prefix, 65, 126),
      'the /26 alone: its usable span, once, and then refused as full',
    );
    for (const refusal of first.lastRefusals) assert.equal(refusal.code, FULL, JSON.stringify(refusal));

    const rest = await fillToExhaustion([agent], [wide], 'wide-after');
    assert.equal(rest.handed.length, 254 - 62, 'the /24 still had room: everything but the /26 span');
    assertWholeRangeOnce(
      { handed: [...first.handed, ...rest.handed], lastRefusals: rest.lastRefusals },
      prefix,
      narrow,
    );
    const again = await cniCall('ADD', agent, narrow.name, narrow.ipam, 'narrow-again');
    assert.equal(again.json?.code, FULL, again.stdout);
    await assertStoredAgree([agent], networks, [...first.handed, ...rest.handed]);
  });

  it('serves a /26 with enable_overlapping_ranges false from its own pool, not checked against the full /24 (whereabouts)', async () => {
    const agent = await startAgent();
    agents.push(agent);
    const prefix = '10.232.43';
    const [wide, isolated] = nestedNetworks(prefix, { enable_overlapping_ranges: false });
    const widely = await fillToExhaustion([agent], [wide], 'wide');
    assert.deepEqual(widely.handed.map((h) => h.address).sort(byAddress), addressesOf(prefix), 'the /24 filled');

    // The user's choice: the /26 is not checked against the /24, so it hands out what the /24 holds.
    const own = await fillToExhaustion([agent], [isolated], 'isolated');
    assert.deepEqual(
      own.handed.map((h) => h.address).sort(byAddress),
      addressesOf(prefix, 65, 126),
      'the /26 served its whole usable span, each address once within it',
    );
    for (const refusal of own.lastRefusals) assert.equal(refusal.code, FULL, JSON.stringify(refusal));
    const stored = (await agent.allocations()).filter((a) => a.network === isolated.name);
    assert.deepEqual(
      stored.map((a) => a.address).sort(byAddress),
      addressesOf(prefix, 65, 126),
      'held by the /26 beside the /24 holding the same addresses',
    );
  });
});

/**
 * The newcomer's duplicate, end to end: a team replacing whereabouts changes the attachment's
 * `"type": "whereabouts"` to `"type": "warren"` and runs the DaemonSet as it comes. Two real agents
 * with the Kubernetes source on and no --store (the DaemonSet's default) on one fake API server,
 * one whereabouts config on both, driven through the installed plugin: no address is handed out on
 * both nodes, to the range's last. An agent told `--store sqlite` under Kubernetes (a per-node
 * store) refuses the same config with code 7 naming the fix, and `warren doctor` flags it.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Finding } from '../../src/cli/doctor/finding.ts';
import { CNI_CODES } from '../../src/cni/errors.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { cniBinDir, resultAddresses } from '../helpers/cni.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../helpers/fake-kube-api.ts';
import { KUBE_NAMESPACE, LEASE_SECONDS, cniCall, duplicatesIn } from '../helpers/kube-store.ts';
import { WARREN_BIN, run, tempDir } from '../helpers/processes.ts';

/** whereabouts' own example, its type changed: 192.168.2.225 to .238, 14 addresses. */
const WHEREABOUTS = {
  range: '192.168.2.225/28',
  datastore: 'kubernetes',
  kubernetes: { kubeconfig: '/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig' },
};

/** The DaemonSet's flags: the Kubernetes source on, the store left to its default. */
const daemonSetArgs = (api: FakeKubeApi, node: string, extra: readonly string[] = []) => [
  '--node-name',
  node,
  '--kubernetes',
  'on',
  '--kubeconfig',
  api.kubeconfigPath,
  '--kube-namespace',
  KUBE_NAMESPACE,
  '--node-lease',
  String(LEASE_SECONDS),
  ...extra,
];

describe("the newcomer's duplicate: one whereabouts config on two nodes", () => {
  let api: FakeKubeApi;
  const agents: AgentHandle[] = [];

  before(async () => {
    api = await startFakeKubeApi({ crds: 'deploy' });
    for (const node of ['kd1', 'kd2']) {
      api.createNode(node);
      agents.push(await startAgent({ args: daemonSetArgs(api, node) }));
    }
  });
  after(async () => {
    for (const a of agents) await a.kill();
    await api?.stop();
  });

  it("cannot give one address twice under the DaemonSet's default store", async () => {
    const [n1, n2] = agents as [AgentHandle, AgentHandle];
    // The report's first two pods, one on each node.
    const first = await Promise.all([
      cniCall('ADD', n1, 'macvlan-conf', WHEREABOUTS, 'pod-a'),
      cniCall('ADD', n2, 'macvlan-conf', WHEREABOUTS, 'pod-b'),
    ]);
    for (const r of first) assert.equal(r.code, 0, r.stdout);
    const [a, b] = first.map(resultAddresses);
    assert.notDeepEqual(a, b, 'the two nodes gave two addresses');

    const rest = await Promise.all(
      Array.from({ length: 12 }, (_, i) => cniCall('ADD', i % 2 === 0 ? n1 : n2, 'macvlan-conf', WHEREABOUTS, `p${i}`)),
    );
    assert.deepEqual(
      rest.filter((r) => r.code !== 0).map((r) => r.stdout),
      [],
    );
    const addresses = [...first, ...rest].flatMap(resultAddresses);
    assert.equal(new Set(addresses).size, 14, 'the 14 addresses, each once');
    for (const a of addresses) assert.match(a, /^192\.168\.2\.(22[5-9]|23[0-8])$/);

    // Each refusal waits for grants that cannot come (the borrower's wait): both at once.
    const more = await Promise.all(
      agents.map((agent, i) => cniCall('ADD', agent, 'macvlan-conf', WHEREABOUTS, `more-${i}`)),
    );
    for (const r of more) assert.equal(r.json?.code, CNI_CODES.POOL_EXHAUSTED, r.stdout);
    const held = (
      await Promise.all(agents.map((a, i) => a.allocations(`?network=macvlan-conf&node=kd${i + 1}`)))
    ).flat();
    assert.equal(held.length, 14);
    assert.deepEqual(duplicatesIn(held), []);
  });

  describe('with a per-node store under Kubernetes', () => {
    let perNode: AgentHandle;
    before(async () => {
      api.createNode('kd3');
      perNode = await startAgent({ args: daemonSetArgs(api, 'kd3', ['--store', 'sqlite']) });
    });
    after(async () => {
      await perNode?.kill();
    });

    it('refuses the shared config with code 7 naming the fix, and doctor flags it as an error', async () => {
      const refused = await cniCall('ADD', perNode, 'macvlan-conf', WHEREABOUTS, 'pod-c');
      assert.equal(refused.json?.code, CNI_CODES.INVALID_CONFIG, refused.stdout);
      assert.match(String(refused.json?.msg), /--store kubernetes|node.local/, refused.stdout);
      assert.deepEqual(await perNode.allocations(), [], 'nothing handed out');

      const confDir = tempDir('warren-kds-conf-');
      writeFileSync(
        join(confDir, '10-macvlan.conflist'),
        JSON.stringify({
          cniVersion: '1.0.0',
          name: 'macvlan-conf',
          plugins: [
            { type: 'macvlan', master: 'eth0', ipam: { type: 'warren', socket: perNode.socket, ...WHEREABOUTS } },
          ],
        }),
      );
      const ctrd = join(tempDir('warren-kds-ctrd-'), 'config.toml');
      writeFileSync(
        ctrd,
        `version = 3\n[plugins."io.containerd.cri.v1.runtime".cni]\nbin_dirs = [${JSON.stringify(cniBinDir())}]\n` +
          `conf_dir = ${JSON.stringify(confDir)}\n`,
      );
      const doctor = await run(process.execPath, [
        WARREN_BIN,
        'doctor',
        '--socket',
        perNode.socket,
        '--containerd-config',
        ctrd,
        '--cni-conf-dir',
        confDir,
        '--json',
      ]);
      assert.equal(doctor.code, 1, doctor.stdout + doctor.stderr);
      const findings = (JSON.parse(doctor.stdout) as { findings: Finding[] }).findings;
      const flagged = findings.filter(
        (f) => f.severity === 'error' && /192\.168\.2\.22[45]|10-macvlan/.test(`${f.title} ${f.detail}`),
      );
      assert.ok(flagged.length > 0, JSON.stringify(findings, null, 2));
      assert.match(flagged.map((f) => f.fix).join('\n'), /--store kubernetes|node.local/);
      assert.ok(
        !findings.some((f) => f.severity === 'ok' && /accepted and ignored/.test(f.title)),
        'the datastore keys are not "accepted and ignored"',
      );
    });
  });
});

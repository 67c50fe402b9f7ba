/**
 * `warren doctor` on where a config's addresses are kept unique (cli/doctor/store-scope.ts): real
 * config files in a temp conf dir, read as the runtime reads them, against the agent's facts. The
 * newcomer's duplicate — a whereabouts config served from a per-node store on two nodes — is an
 * error under Kubernetes; whereabouts' store keys are never "accepted and ignored".
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { DoctorFacts } from '../../../src/api/doctor.ts';
import { DEFAULT_SOCKET } from '../../../src/api/socket.ts';
import { deriveConfig } from '../../../src/cni/derived-config.ts';
import { DEFAULT_JOURNAL_DIR } from '../../../src/cni/journal-dir.ts';
import { scanConfDir } from '../../../src/cli/doctor/conf-dir.ts';
import type { Finding } from '../../../src/cli/doctor/finding.ts';
import { configFindings } from '../../../src/cli/doctor/node-checks.ts';
import type { StoreKind } from '../../../src/store/store.ts';
import { tempDir } from '../../helpers/processes.ts';

function facts(kind: StoreKind, over: Partial<DoctorFacts> = {}): DoctorFacts {
  return {
    node: 'node-a',
    version: '1.2.3',
    pid: 42,
    socket: DEFAULT_SOCKET,
    stateDir: '/var/lib/warren',
    journalDir: DEFAULT_JOURNAL_DIR,
    cniConfDir: '/etc/cni/net.d',
    manageCniConfig: false,
    store: { kind, description: kind, healthy: true },
    netns: [],
    recordedNetns: [],
    ...over,
  };
}

/** A whereabouts config moved over as a newcomer does: only its type changed. */
const WHEREABOUTS = {
  cniVersion: '1.0.0',
  name: 'macvlan-net',
  plugins: [
    {
      type: 'macvlan',
      master: 'eth0',
      ipam: {
        type: 'warren',
        range: '192.168.2.225/28',
        datastore: 'kubernetes',
        kubernetes: { kubeconfig: '/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig' },
        log_level: 'debug',
      },
    },
  ],
};

function findingsOf(files: Record<string, string>, agent: DoctorFacts | undefined): Finding[] {
  const dir = tempDir('warren-doctor-scope-');
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return configFindings(scanConfDir(dir), agent);
}
const json = (value: unknown): string => JSON.stringify(value);
const ids = (found: readonly Finding[]) => found.map((f) => `${f.id}:${f.severity}`);
const withIpam = (extra: Record<string, unknown>) => ({
  ...WHEREABOUTS,
  plugins: [{ ...WHEREABOUTS.plugins[0], ipam: { ...WHEREABOUTS.plugins[0]?.ipam, ...extra } }],
});
const UNDER_KUBERNETES = facts('sqlite', { nodeLocalOnly: {} });

describe('doctor: where a config is kept unique across nodes', () => {
  it('flags a whereabouts config on a per-node store under Kubernetes as an error, so two nodes cannot hand out one address', () => {
    const found = findingsOf({ '10-wb.conflist': json(WHEREABOUTS) }, UNDER_KUBERNETES);
    const flagged = found.find((f) => f.id === 'config-not-node-local');
    assert.equal(flagged?.severity, 'error');
    assert.match(flagged?.detail ?? '', /ipam\.datastore, ipam\.kubernetes/);
    assert.match(flagged?.detail ?? '', /refuses every ADD of it \(code 7\)/);
    assert.match(flagged?.fix ?? '', /--store kubernetes/);
    assert.match(flagged?.fix ?? '', /"node_local": true in the ipam section of .*10-wb\.conflist/);
  });

  it("never calls whereabouts' datastore, kubernetes or etcd_host keys accepted and ignored, whatever the store", () => {
    const config = json(withIpam({ etcd_host: 'etcd:2379' }));
    for (const agent of [UNDER_KUBERNETES, facts('sqlite'), facts('kubernetes'), facts('etcd'), undefined]) {
      const found = findingsOf({ '10-wb.conflist': config }, agent);
      const ignored = found.filter((f) => f.id === 'whereabouts-keys-ignored');
      assert.equal(ignored.length, 1, `${agent?.store.kind}: ${ids(found)}`);
      assert.match(ignored[0]?.title ?? '', /1 whereabouts key accepted and ignored/);
      assert.doesNotMatch(ignored[0]?.detail ?? '', /datastore|kubernetes|etcd_host/);
    }
  });

  it('says a cluster store serves the store keys, with no error', () => {
    for (const kind of ['kubernetes', 'etcd'] as const) {
      const found = findingsOf({ '10-wb.conflist': json(WHEREABOUTS) }, facts(kind));
      assert.ok(!found.some((f) => f.severity === 'error'), ids(found).join(', '));
      const served = found.find((f) => f.id === 'whereabouts-store-keys-served');
      assert.equal(served?.severity, 'ok');
      assert.match(served?.detail ?? '', new RegExp(`through their ${kind} store`));
    }
  });

  it('serves a config marked node_local from a per-node store under Kubernetes', () => {
    const found = findingsOf({ '10-wb.conflist': json(withIpam({ node_local: true })) }, UNDER_KUBERNETES);
    assert.ok(!found.some((f) => f.severity !== 'ok'), ids(found).join(', '));
    assert.match(found.find((f) => f.id === 'config-node-local')?.title ?? '', /marked "node_local": true/);
  });

  it("takes the agent's config derived from a host-local primary as node-local, and only with its own ranges", () => {
    const primary = {
      cniVersion: '1.0.0',
      name: 'cbr0',
      plugins: [{ type: 'bridge', bridge: 'cni0', ipam: { type: 'host-local', subnet: '10.244.1.0/24' } }],
    };
    const derived = deriveConfig({
      primaryName: '10-cbr0.conflist',
      primaryText: json(primary),
      cniVersionMax: '1.0.0',
    });
    assert.ok(derived.ok);
    const pools = derived.hostLocal?.ranges.map((r) => r.pool) ?? [];
    const agent = facts('sqlite', { nodeLocalOnly: { derived: { network: 'cbr0', pools } } });
    const found = findingsOf({ '00-warren.conflist': derived.text }, agent);
    assert.ok(!found.some((f) => f.severity !== 'ok'), ids(found).join(', '));
    assert.match(found.find((f) => f.id === 'config-node-local')?.title ?? '', /this node's own pod CIDR/);
    // The same network name on a config the agent did not derive is not node-local by construction.
    const other = { ...primary, plugins: [{ type: 'bridge', ipam: { type: 'warren', range: '10.244.1.0/24' } }] };
    assert.deepEqual(
      ids(findingsOf({ '10-cbr0.conflist': json(other) }, agent)).filter((id) => !id.endsWith(':ok')),
      ['config-not-node-local:error'],
    );
  });

  it('warns of store keys on a per-node store off Kubernetes, where the agent cannot tell', () => {
    const found = findingsOf({ '10-wb.conflist': json(WHEREABOUTS) }, facts('sqlite'));
    const warned = found.find((f) => f.id === 'whereabouts-store-keys-per-node');
    assert.equal(warned?.severity, 'warning');
    assert.match(warned?.fix ?? '', /--store etcd elsewhere/);
    assert.ok(!found.some((f) => f.severity === 'error'));
  });

  it('leaves a plain config on a plain single node alone', () => {
    const plain = { cniVersion: '1.0.0', name: 'n', type: 'bridge', ipam: { type: 'warren', range: '10.9.0.0/24' } };
    assert.deepEqual(
      ids(findingsOf({ '10-n.conf': json(plain) }, facts('sqlite'))).filter((id) => !id.endsWith(':ok')),
      [],
    );
  });
});

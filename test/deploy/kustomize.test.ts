/**
 * deploy/ as kubectl renders it (`kubectl kustomize`, offline): the default (`kubectl apply -k
 * deploy`: the kubernetes store, with its CRDs and rights) and every overlay (deploy/overlays/*: the
 * store per node, and etcd), each rendered document valid against its kind's schema. The default
 * renders exactly the files deploy/kustomization.yaml lists, unchanged; an overlay renders base/
 * with its store set and nothing of the kubernetes store (no CRD, no right on warren.dev or on
 * Leases), its DaemonSet otherwise the default's, and settings the agent accepts. The kustomizations
 * use only what kubectl 1.20's kustomize (Debian's) reads as well as today's. Needs kubectl
 * (scripts/setup.sh installs it); skipped, saying so, where there is none.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { IDaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import type { IContainer } from 'kubernetes-models/v1/Container';
import { resolveAgentOptions } from '../../src/agent/settings/options.ts';
import {
  DEPLOY,
  type Document,
  OVERLAYS,
  STORE_OVERLAYS,
  assertValid,
  documentsOf,
  kustomization,
  listedFiles,
  render,
  skipWithoutKubectl as skip,
  theOne,
} from './deploy-files.ts';

const key = (doc: Document) => `${doc.kind}/${doc.metadata?.namespace ?? ''}/${doc.metadata?.name}`;
/** A document as the API server would take it: without the file it came from. */
const object = ({ file: _, ...rest }: Document) => rest;
const byKey = (docs: readonly Document[]) => new Map(docs.map((doc) => [key(doc), object(doc)]));
const filesIn = (dir: string) =>
  readdirSync(join(DEPLOY, dir))
    .filter((name) => /\.ya?ml$/.test(name) && name !== 'kustomization.yaml')
    .map((name) => `${dir}/${name}`)
    .sort();
const agentOf = (docs: readonly Document[]) =>
  theOne<IDaemonSet>(docs, 'DaemonSet').spec?.template.spec?.containers.find((c) => c.name === 'agent') as IContainer;

/** The agent's settings from its env, a value standing in for each taken from elsewhere. */
function settingsOf(agent: IContainer, elsewhere: Record<string, string>) {
  const env: NodeJS.ProcessEnv = { WARREN_STATE_DIR: '/var/lib/warren' };
  for (const e of agent.env ?? []) {
    const value = e.value ?? elsewhere[e.valueFrom?.fieldRef?.fieldPath ?? e.valueFrom?.secretKeyRef?.key ?? ''];
    assert.ok(value !== undefined, `${e.name}: where its value comes from is one this test knows`);
    // As the kubelet expands: only from entries listed before (a patch may move entries).
    env[e.name] = value.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => env[name] ?? whole);
    assert.doesNotMatch(env[e.name] as string, /\$\(/, `${e.name}: what it refers to is listed before it`);
  }
  return resolveAgentOptions({}, env, 0, '/app') as unknown as Record<string, unknown>;
}
const FIELDS = { 'spec.nodeName': 'node-1', 'status.podIP': '10.1.2.3', 'metadata.namespace': 'warren' };

describe('deploy/kustomization.yaml (the default: the kubernetes store)', () => {
  it("lists base/'s files, every CRD and the kubernetes store's rights, and nothing else", () => {
    assert.deepEqual(
      [...listedFiles('')].sort(),
      [...listedFiles('base'), ...filesIn('crds'), ...filesIn('kubernetes-store')].sort(),
    );
    for (const dir of ['base', 'crds', 'kubernetes-store'])
      assert.deepEqual([...listedFiles(dir)].sort(), filesIn(dir), `${dir}/kustomization.yaml lists its files`);
  });

  it('renders exactly the files it lists, unchanged, each valid', { skip }, async () => {
    const rendered = await render('');
    for (const doc of rendered) assertValid(doc);
    assert.deepEqual(byKey(rendered), byKey(documentsOf(listedFiles(''))));
  });
});

describe('the overlays (deploy/overlays/*: the other stores)', () => {
  it('are overlays of base/ (stores) or of what deploy/ takes, in the fields kubectl 1.20 reads too (bases, patchesStrategicMerge)', () => {
    for (const name of OVERLAYS) {
      const k = kustomization(`overlays/${name}`);
      assert.deepEqual(Object.keys(k).sort(), ['bases', 'patchesStrategicMerge'], name);
      assert.deepEqual(
        k.bases,
        (STORE_OVERLAYS as readonly string[]).includes(name)
          ? ['../../base']
          : ['../../base', '../../crds', '../../kubernetes-store'],
        name,
      );
    }
    assert.deepEqual(readdirSync(join(DEPLOY, 'overlays')).sort(), [...OVERLAYS].sort());
  });

  for (const name of STORE_OVERLAYS) {
    it(`${name}: renders valid objects, base/'s and nothing of the kubernetes store`, { skip }, async () => {
      const rendered = await render(`overlays/${name}`);
      for (const doc of rendered) assertValid(doc);
      const base = byKey(documentsOf(listedFiles('base')));
      assert.deepEqual([...byKey(rendered).keys()].sort(), [...base.keys()].sort());
      const rules = rendered.flatMap((doc) => (doc as { rules?: { apiGroups?: string[] }[] }).rules ?? []);
      for (const group of ['warren.dev', 'coordination.k8s.io'])
        assert.ok(!rules.some((rule) => rule.apiGroups?.includes(group)), `${name} grants nothing on ${group}`);
      assert.ok(!rendered.some((doc) => doc.kind === 'CustomResourceDefinition'), `${name} installs no CRD`);
      for (const [k, doc] of byKey(rendered)) if (!k.startsWith('DaemonSet/')) assert.deepEqual(doc, base.get(k), k);
    });
  }

  it('sqlite-per-node: the agent on its own SQLite store, without Leases, its DaemonSet otherwise the default', {
    skip,
  }, async () => {
    const [rendered, defaults] = [await render('overlays/sqlite-per-node'), await render('')];
    const agent = agentOf(rendered);
    const options = settingsOf(agent, FIELDS);
    assert.equal(options.store, 'sqlite');
    assert.equal(
      agent.env?.some((e) => e.name === 'WARREN_KUBE_NAMESPACE'),
      false,
    );
    const unchanged = (docs: Document[]) => {
      const ds = structuredClone(object(theOne<Document>(docs, 'DaemonSet'))) as unknown as IDaemonSet;
      const a = ds.spec?.template.spec?.containers.find((c) => c.name === 'agent') as IContainer;
      // Where a patched entry lands differs between kustomize versions; the order that matters is checked above.
      a.env = (a.env ?? [])
        .filter((e) => !['WARREN_STORE', 'WARREN_KUBE_NAMESPACE'].includes(e.name))
        .sort((x, y) => x.name.localeCompare(y.name));
      return ds;
    };
    assert.deepEqual(unchanged(rendered), unchanged(defaults));
  });

  it('multus: the default with the config manager off and the CNI conf dir read-only, everything else unchanged', {
    skip,
  }, async () => {
    const [rendered, defaults] = [await render('overlays/multus'), await render('')];
    for (const doc of rendered) assertValid(doc);
    const others = (docs: Document[]) => [...byKey(docs)].filter(([k]) => !k.startsWith('DaemonSet/'));
    assert.deepEqual(others(rendered), others(defaults), 'the store, its CRDs and rights as the default has them');
    const agent = agentOf(rendered);
    assert.equal(settingsOf(agent, FIELDS).manageCniConfig, false);
    assert.equal(agent.volumeMounts?.find((m) => m.mountPath === '/etc/cni/net.d')?.readOnly, true);
    const unchanged = (docs: Document[]) => {
      const ds = structuredClone(object(theOne<Document>(docs, 'DaemonSet'))) as unknown as IDaemonSet;
      const a = ds.spec?.template.spec?.containers.find((c) => c.name === 'agent') as IContainer;
      a.env = (a.env ?? []).filter((e) => e.name !== 'WARREN_MANAGE_CNI_CONFIG');
      a.volumeMounts = (a.volumeMounts ?? [])
        .map(({ readOnly: _, ...m }) => m)
        .sort((x, y) => x.name.localeCompare(y.name));
      return ds;
    };
    assert.deepEqual(unchanged(rendered), unchanged(defaults));
  });

  it('etcd: the agent on etcd, its endpoints and TLS files from the Secret warren-etcd, mounted read-only', {
    skip,
  }, async () => {
    const rendered = await render('overlays/etcd');
    const ds = theOne<IDaemonSet>(rendered, 'DaemonSet');
    const agent = agentOf(rendered);
    const env = new Map((agent.env ?? []).map((e) => [e.name, e]));
    assert.deepEqual(env.get('WARREN_ETCD_ENDPOINTS')?.valueFrom, {
      secretKeyRef: { name: 'warren-etcd', key: 'endpoints' },
    });
    assert.equal(env.has('WARREN_KUBE_NAMESPACE'), false);
    const volume = ds.spec?.template.spec?.volumes?.find((v) => v.secret?.secretName === 'warren-etcd');
    const mount = agent.volumeMounts?.find((m) => m.name === volume?.name);
    assert.equal(mount?.readOnly, true);
    for (const file of ['WARREN_ETCD_CA', 'WARREN_ETCD_CERT', 'WARREN_ETCD_KEY'])
      assert.match(env.get(file)?.value ?? '', new RegExp(`^${mount?.mountPath}/[a-z.]+$`), `${file} is in the Secret`);
    const options = settingsOf(agent, {
      ...FIELDS,
      endpoints: 'https://etcd-0.example:2379,https://etcd-1.example:2379',
    });
    assert.equal(options.store, 'etcd');
  });
});

/**
 * deploy/ as a cluster would take it with the default store (`kubectl apply -k deploy`), checked
 * without a cluster, from the files deploy/kustomization.yaml lists: every YAML document is an
 * object Kubernetes knows, with no field it does not know, valid against its schema
 * (kubernetes-models); and the objects are what docs/kubernetes.md ("What `kubectl apply -k deploy` installs") says: a DaemonSet on the
 * host network, named after its node, on the kubernetes store with its Leases in its own namespace,
 * with the host paths the agent and the plugin share, an init step installing the plugin, probes,
 * every taint tolerated, node-critical priority, resources. Every WARREN_* variable deploy/ sets or
 * documents is one the agent reads. (The rights: rbac.test.ts; the CRDs: crds.test.ts; the
 * overlays, rendered by kubectl: kustomize.test.ts.)
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { dumpYaml, loadAllYaml } from '@kubernetes/client-node';
import type { IDaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import { SETTINGS } from '../../src/agent/settings/table.ts';
import { resolveAgentOptions } from '../../src/agent/settings/options.ts';
import { imageReference, imageTag } from '../../scripts/build-image.ts';
import { DEPLOY, NAMESPACE, assertValid, documentsOf, jsYaml, listedFiles, theOne } from './deploy-files.ts';

const files = listedFiles('');
const texts = new Map(files.map((file) => [file, readFileSync(join(DEPLOY, file), 'utf8')]));
const documents = documentsOf(files);

const daemonSet = theOne<IDaemonSet>(documents, 'DaemonSet');
const pod = daemonSet.spec?.template.spec;
const agent = pod?.containers.find((c) => c.name === 'agent');
const init = pod?.initContainers ?? [];
const agentEnv = new Map((agent?.env ?? []).map((e) => [e.name, e]));

/** The host path behind a container's mount, and the mount's propagation. */
function hostMounts(
  container:
    | { volumeMounts?: { name: string; mountPath: string; mountPropagation?: string; readOnly?: boolean }[] }
    | undefined,
) {
  const volumes = new Map((pod?.volumes ?? []).map((v) => [v.name, v]));
  return new Map(
    (container?.volumeMounts ?? []).map((m) => [
      m.mountPath,
      { hostPath: volumes.get(m.name)?.hostPath?.path, propagation: m.mountPropagation, readOnly: m.readOnly === true },
    ]),
  );
}

/**
 * The agent's environment as the kubelet builds it on node-1 at 10.1.2.3: downward API values, then
 * $(VAR) of earlier entries; and an explicit state dir, the root default, so that resolving creates
 * nothing here.
 */
function kubeletEnv(): NodeJS.ProcessEnv {
  const fields: Record<string, string> = {
    'spec.nodeName': 'node-1',
    'status.podIP': '10.1.2.3',
    'metadata.namespace': daemonSet.metadata?.namespace ?? '',
  };
  const env: NodeJS.ProcessEnv = { WARREN_STATE_DIR: '/var/lib/warren' };
  for (const e of agent?.env ?? []) {
    const fieldPath = e.valueFrom?.fieldRef?.fieldPath;
    const value = fieldPath === undefined ? (e.value ?? '') : fields[fieldPath];
    assert.ok(value !== undefined, `${e.name}: the downward API's ${fieldPath} is one this test knows`);
    env[e.name] = value.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => env[name] ?? whole);
  }
  return env;
}

describe('deploy/', () => {
  it('holds YAML documents only of the kinds Warren deploys, each in its own file', () => {
    assert.ok(files.length > 0, 'deploy/kustomization.yaml lists YAML files');
    assert.deepEqual(documents.map((doc) => doc.kind).sort(), [
      'ClusterRole',
      'ClusterRole',
      'ClusterRole',
      'ClusterRoleBinding',
      'ClusterRoleBinding',
      'CustomResourceDefinition',
      'CustomResourceDefinition',
      'CustomResourceDefinition',
      'CustomResourceDefinition',
      'CustomResourceDefinition',
      // WarrenAddressHolding
      'CustomResourceDefinition',
      // WarrenClusterState
      'CustomResourceDefinition',
      // WarrenPool
      'CustomResourceDefinition',
      // WarrenReservation
      'CustomResourceDefinition',
      'DaemonSet',
      'Namespace',
      'Role',
      'RoleBinding',
      'ServiceAccount',
    ]);
    assert.equal(new Set(documents.map((doc) => doc.file)).size, documents.length);
  });

  it('opens every YAML file with a comment that says what it is', () => {
    const yaml = readdirSync(DEPLOY, { recursive: true, encoding: 'utf8' }).filter((f) => /\.ya?ml$/.test(f));
    for (const file of yaml)
      assert.match(readFileSync(join(DEPLOY, file), 'utf8'), /^# \S/, `${file} starts with a comment`);
  });

  it('has only fields Kubernetes knows: loadAllYaml gives back every field the files write', () => {
    for (const file of files) {
      const text = texts.get(file) as string;
      const typed = loadAllYaml(text);
      const written = jsYaml.loadAll(text).filter((doc) => doc !== null);
      assert.equal(typed.length, written.length, file);
      typed.forEach((object, i) =>
        assert.deepEqual(
          jsYaml.loadAll(dumpYaml(object))[0],
          written[i],
          `${file}: a field loadAllYaml dropped is one the API server would too`,
        ),
      );
    }
  });

  it('is valid against the Kubernetes schema of each kind', () => {
    for (const doc of documents) assertValid(doc);
  });

  it('puts its namespaced objects in the warren namespace, which admits privileged pods', () => {
    const namespaced = ['ServiceAccount', 'DaemonSet', 'Role', 'RoleBinding'];
    for (const doc of documents.filter((d) => namespaced.includes(d.kind)))
      assert.equal(doc.metadata?.namespace, NAMESPACE, `${doc.kind} ${doc.metadata?.name}`);
    for (const doc of documents.filter((d) => !namespaced.includes(d.kind)))
      assert.equal(doc.metadata?.namespace, undefined, `${doc.kind} ${doc.metadata?.name} is cluster-scoped`);
    const namespace = theOne<{ metadata: { name: string; labels?: Record<string, string> } }>(documents, 'Namespace');
    assert.equal(namespace.metadata.name, NAMESPACE);
    assert.equal(namespace.metadata.labels?.['pod-security.kubernetes.io/enforce'], 'privileged');
  });
});

describe('the DaemonSet', () => {
  it('selects the pods of its own template and rolls one node at a time', () => {
    const labels = daemonSet.spec?.template.metadata?.labels ?? {};
    for (const [key, value] of Object.entries(daemonSet.spec?.selector.matchLabels ?? {}))
      assert.equal(labels[key], value, key);
    assert.deepEqual(daemonSet.spec?.updateStrategy, { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } });
  });

  it("runs on the host network, resolving cluster names, named after its node from the downward API's spec.nodeName", () => {
    assert.equal(pod?.hostNetwork, true);
    assert.equal(pod?.dnsPolicy, 'ClusterFirstWithHostNet');
    assert.deepEqual(agentEnv.get('WARREN_NODE_NAME'), {
      name: 'WARREN_NODE_NAME',
      valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } },
    });
  });

  it("runs the kubernetes store, its Leases in the pod's namespace (downward API), its node's SQLite on the host", () => {
    assert.deepEqual(agentEnv.get('WARREN_STORE'), { name: 'WARREN_STORE', value: 'kubernetes' });
    assert.deepEqual(agentEnv.get('POD_NAMESPACE'), {
      name: 'POD_NAMESPACE',
      valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } },
    });
    assert.deepEqual(agentEnv.get('WARREN_KUBE_NAMESPACE'), {
      name: 'WARREN_KUBE_NAMESPACE',
      value: '$(POD_NAMESPACE)',
    });
    const names = (agent?.env ?? []).map((e) => e.name);
    // Kubernetes expands $(VAR) only from entries listed before.
    assert.ok(names.indexOf('POD_NAMESPACE') < names.indexOf('WARREN_KUBE_NAMESPACE'), 'POD_NAMESPACE comes first');
    // The addresses of the node's own blocks live in its SQLite database, which must survive the pod.
    assert.equal(hostMounts(agent).get('/var/lib/warren')?.hostPath, '/var/lib/warren');
  });

  it('tolerates every taint, is system-node-critical and privileged', () => {
    assert.deepEqual(pod?.tolerations, [{ operator: 'Exists' }]);
    assert.equal(pod?.priorityClassName, 'system-node-critical');
    assert.equal(agent?.securityContext?.privileged, true);
  });

  it('requests CPU and memory and limits memory, for the agent and the init step', () => {
    for (const container of [agent, ...init]) {
      assert.ok(container?.resources?.requests?.cpu, `${container?.name} requests CPU`);
      assert.ok(container?.resources?.requests?.memory, `${container?.name} requests memory`);
      assert.ok(container?.resources?.limits?.memory, `${container?.name} limits memory`);
    }
  });

  it("keeps the agent's memory small: V8's young generation capped, glibc's malloc on two arenas with fixed thresholds, no heap cap", () => {
    // What bench/footprint.ts measures the agent with (it reads these two from this manifest).
    const nodeOptions = String(agentEnv.get('NODE_OPTIONS')?.value ?? '').split(' ');
    assert.ok(nodeOptions.includes('--max-semi-space-size=1'), `NODE_OPTIONS ${nodeOptions.join(' ')}`);
    assert.equal(
      nodeOptions.some((o) => o.startsWith('--max-old-space-size')),
      false,
      'the old generation is the heap the agent needs: a cap would crash it on a large listing',
    );
    assert.equal(agentEnv.get('MALLOC_ARENA_MAX')?.value, '2');
    // Fixed, so glibc does not raise them after a burst and keep its large blocks, freed, for good.
    assert.equal(agentEnv.get('MALLOC_MMAP_THRESHOLD_')?.value, '65536');
    assert.equal(agentEnv.get('MALLOC_TRIM_THRESHOLD_')?.value, '131072');
  });

  it('mounts the host paths the agent shares with the plugin and the runtime, where the agent looks by default', () => {
    const mounts = hostMounts(agent);
    const expect = (mountPath: string, hostPath: string) =>
      assert.equal(mounts.get(mountPath)?.hostPath, hostPath, `${mountPath} is the host's ${hostPath}`);
    expect('/var/lib/warren', '/var/lib/warren');
    expect('/run/warren', '/run/warren');
    expect('/opt/cni/bin', '/opt/cni/bin');
    // `warren uninstall`, run in the agent's container, removes the plugin from it.
    assert.equal(mounts.get('/opt/cni/bin')?.readOnly, false, 'the CNI bin dir is writable for warren uninstall');
    expect('/etc/cni/net.d', '/etc/cni/net.d');
    expect('/var/run/netns', '/var/run/netns');
    // Namespaces made after the agent started must appear inside it.
    assert.equal(mounts.get('/var/run/netns')?.propagation, 'HostToContainer');
    // containerd's socket, through its directory (a restarted containerd makes a new socket).
    const socket = agentEnv.get('WARREN_CONTAINERD_SOCKET')?.value ?? SETTINGS.containerdSocket.default;
    assert.equal(socket, '/run/containerd/containerd.sock');
    expect('/run/containerd', '/run/containerd');
    for (const [path, mount] of mounts) assert.ok(mount.hostPath !== undefined, `${path} is a host path`);
  });

  it('installs the plugin into the host CNI bin dir in an init container, with warren install, from the same image', () => {
    assert.equal(init.length, 1);
    const [step] = init;
    assert.deepEqual(
      [...(step?.command ?? []), ...(step?.args ?? [])],
      ['warren', 'install', '--cni-bin-dir', '/host/opt/cni/bin'],
    );
    assert.equal(hostMounts(step).get('/host/opt/cni/bin')?.hostPath, '/opt/cni/bin');
    assert.equal(step?.image, agent?.image);
  });

  it('probes the agent over HTTP on its metrics port, never by starting a Node: alive at /livez, ready at /readyz', () => {
    const port = agent?.ports?.find((p) => p.name === 'metrics');
    assert.ok(port !== undefined, 'the agent declares its metrics port');
    const expected = { startupProbe: '/livez', livenessProbe: '/livez', readinessProbe: '/readyz' } as const;
    for (const [name, path] of Object.entries(expected)) {
      const probe = agent?.[name as keyof typeof expected];
      assert.equal(probe?.exec, undefined, `${name} starts no process`);
      assert.equal(probe?.httpGet?.path, path, name);
      assert.ok(
        probe?.httpGet?.port === 'metrics' || probe?.httpGet?.port === port.containerPort,
        `${name} asks the metrics port`,
      );
      assert.equal(probe?.httpGet?.host, undefined, `${name} asks the pod IP, where WARREN_METRICS_ADDRESS listens`);
      // A loaded node answers late: kubelet's default of one second would count that as a failure.
      assert.ok((probe?.timeoutSeconds ?? 1) >= 5, `${name} waits at least 5 s`);
    }
    const live = agent?.livenessProbe;
    // A restart costs the node its IPAM while the agent starts again: only after a minute of silence.
    assert.ok(
      (live?.periodSeconds ?? 10) * (live?.failureThreshold ?? 3) >= 60,
      'liveness restarts only after a minute without an answer',
    );
    const start = agent?.startupProbe;
    assert.ok((start?.periodSeconds ?? 10) * (start?.failureThreshold ?? 3) >= 300, 'startup is given 5 minutes');
    assert.match(
      agentEnv.get('WARREN_METRICS_ADDRESS')?.value ?? '',
      /^\$\(POD_IP\):\d+$/,
      'the probes find the agent on the pod IP',
    );
  });

  it('runs the image scripts/build-image.ts makes, never pulling it', () => {
    for (const container of [agent, ...init]) {
      assert.equal(container?.image, `warren:${imageTag()}`);
      assert.equal(`docker.io/library/${container?.image}`, imageReference());
      assert.equal(container?.imagePullPolicy, 'IfNotPresent');
    }
    assert.deepEqual([...(agent?.command ?? []), ...(agent?.args ?? [])], ['warren', 'agent']);
  });

  it('mounts only volumes it declares', () => {
    const declared = new Set((pod?.volumes ?? []).map((v) => v.name));
    for (const container of [agent, ...init])
      for (const m of container?.volumeMounts ?? [])
        assert.ok(declared.has(m.name), `${container?.name} mounts ${m.name}`);
  });
});

describe('the settings deploy/ names', () => {
  const knownEnv = new Set(Object.values(SETTINGS).map((s) => s.env));
  const knownFlags = new Set(Object.values(SETTINGS).map((s) => s.flag));

  it('are variables the agent reads, set or documented in comments, in every file and overlay', () => {
    for (const file of readdirSync(DEPLOY, { recursive: true, encoding: 'utf8' })
      .filter((f) => !f.startsWith('grafana') && statSync(join(DEPLOY, f)).isFile())
      .sort()) {
      for (const [name] of readFileSync(join(DEPLOY, file), 'utf8').matchAll(/\bWARREN_[A-Z0-9_]+/g))
        assert.ok(knownEnv.has(name), `${file}: ${name} is a setting of the agent`);
    }
  });

  it("are flags the agent takes, on the agent's command line", () => {
    const argv = [...(agent?.command ?? []), ...(agent?.args ?? [])];
    for (const arg of argv.filter((a) => a.startsWith('--')))
      assert.ok(knownFlags.has(arg.slice(2).split('=')[0] as string), `${arg} is a flag of warren agent`);
  });

  it('give values the agent accepts: the kubernetes store, its Leases in the namespace the pod runs in', () => {
    const settingOf = new Map(Object.entries(SETTINGS).map(([key, s]) => [s.env, key]));
    const options = resolveAgentOptions({}, kubeletEnv(), 0, '/app') as unknown as Record<string, unknown>;
    assert.equal(options.nodeName, 'node-1');
    assert.equal(options.store, 'kubernetes');
    assert.equal(options[settingOf.get('WARREN_KUBE_NAMESPACE') as string], daemonSet.metadata?.namespace);
    assert.equal(options.socket, '/run/warren/warren.sock');
    assert.equal(options[settingOf.get('WARREN_KUBERNETES') as string], true);
    assert.equal(options[settingOf.get('WARREN_POD_GONE_GRACE') as string], 600);
  });
});

describe("the DaemonSet's metrics", () => {
  const METRICS_PORT = 9464;

  it('annotates its pods for a scrape without a ServiceMonitor: prometheus.io/scrape, port and path', () => {
    const annotations = daemonSet.spec?.template.metadata?.annotations ?? {};
    assert.equal(annotations['prometheus.io/scrape'], 'true');
    assert.equal(annotations['prometheus.io/port'], String(METRICS_PORT));
    assert.equal(annotations['prometheus.io/path'], '/metrics');
  });

  it("declares the agent's metrics port, named metrics, the port the annotation names", () => {
    const ports = agent?.ports ?? [];
    assert.deepEqual(ports, [{ name: 'metrics', containerPort: METRICS_PORT, protocol: 'TCP' }]);
    assert.equal(
      String(ports[0]?.containerPort),
      daemonSet.spec?.template.metadata?.annotations?.['prometheus.io/port'],
    );
  });

  it("serves metrics on the node's IP: POD_IP from status.podIP, then WARREN_METRICS_ADDRESS $(POD_IP):9464 listed after it", () => {
    assert.deepEqual(agentEnv.get('POD_IP'), {
      name: 'POD_IP',
      valueFrom: { fieldRef: { fieldPath: 'status.podIP' } },
    });
    assert.deepEqual(agentEnv.get('WARREN_METRICS_ADDRESS'), {
      name: 'WARREN_METRICS_ADDRESS',
      value: `$(POD_IP):${METRICS_PORT}`,
    });
    const names = (agent?.env ?? []).map((e) => e.name);
    // Kubernetes expands $(VAR) only from entries listed before.
    assert.ok(names.indexOf('POD_IP') < names.indexOf('WARREN_METRICS_ADDRESS'), 'POD_IP comes first');
  });

  it('gives the agent a metrics address on the pod IP once Kubernetes has expanded $(POD_IP)', () => {
    const options = resolveAgentOptions({}, kubeletEnv(), 0, '/app');
    assert.deepEqual(options.metricsAddress, { host: '10.1.2.3', port: METRICS_PORT });
  });
});

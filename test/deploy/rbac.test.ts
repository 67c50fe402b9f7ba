/**
 * The rights deploy/ grants are exactly the calls the code makes, both ways: nothing the code calls
 * is missing, nothing granted goes unused. The code's calls are found in src/ mechanically:
 * - @kubernetes/client-node calls and list-watch paths (pods, nodes, events), by the pattern of each;
 * - the kubernetes store's requests, made through `Resource` (src/store/kubernetes/resources.ts):
 *   each object holding a Resource is known by name with the resource it serves, and each call of
 *   a Resource method on it is one verb (`replace(..., 'status')` the status subresource's);
 * - every API path written in src/, each of which must be one this test knows.
 * What is found must equal the tables below (AGENT, MIGRATE: the calls, as a reader checks them),
 * and the tables the rules: the agent's ClusterRoles (cluster-wide) and its Role (Leases, in its own
 * namespace), bound to its ServiceAccount; and `warren-migrate`, bound to no one, which adds what
 * `warren migrate whereabouts` (src/cli/migrate/) reads beyond the agent's rights.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import type { IClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import type { IClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import type { IRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import type { IRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import type { IServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { REPO } from '../helpers/processes.ts';
import {
  type Document,
  OVERLAYS,
  STORE_OVERLAYS,
  documentsOf,
  listedFiles,
  render,
  skipWithoutKubectl,
  theOne,
} from './deploy-files.ts';

/** One right: `verb group/resource[/subresource] @scope`; the core group is ''. */
type Scope = 'cluster' | 'namespace';
const need = (verb: string, group: string, resource: string, scope: Scope = 'cluster') =>
  `${verb} ${group}/${resource} @${scope}`;
const needs = (verbs: string[], group: string, resource: string, scope: Scope = 'cluster') =>
  verbs.map((verb) => need(verb, group, resource, scope));

/** What the agent calls: its sources, its Events, and the kubernetes store. */
const AGENT = [
  ...needs(['get', 'list', 'watch'], '', 'pods'),
  ...needs(['create', 'patch'], '', 'events'),
  ...needs(['get', 'list', 'watch'], '', 'nodes'),
  ...needs(['get', 'list', 'watch'], '', 'namespaces'),
  ...needs(['list', 'watch'], 'warren.dev', 'warrenpools'),
  need('update', 'warren.dev', 'warrenpools/status'),
  ...needs(['get', 'list', 'watch'], 'k8s.cni.cncf.io', 'ipamclaims'),
  need('patch', 'k8s.cni.cncf.io', 'ipamclaims/status'),
  ...needs(['get', 'list', 'create', 'update'], 'warren.dev', 'warrenranges'),
  ...needs(['get', 'list', 'watch', 'create', 'update', 'delete'], 'warren.dev', 'warrenblocks'),
  ...needs(['get', 'list', 'watch', 'create', 'update', 'delete'], 'warren.dev', 'warrenblockpublications'),
  ...needs(['get', 'list', 'watch', 'create', 'update'], 'warren.dev', 'warrenaddressrequests'),
  ...needs(['get', 'list', 'watch', 'create', 'update'], 'warren.dev', 'warrenaddressspaces'),
  ...needs(['get', 'list', 'watch', 'create', 'update'], 'warren.dev', 'warrenclusterstates'),
  ...needs(['list', 'watch'], 'warren.dev', 'warrenreservations'),
  need('patch', 'warren.dev', 'warrenreservations/status'),
  ...needs(['get', 'list', 'watch', 'create', 'update', 'delete'], 'warren.dev', 'warrenaddressholdings'),
  ...needs(['list', 'watch'], 'apps', 'statefulsets'),
  ...needs(['get', 'list', 'watch', 'create', 'update', 'delete'], 'coordination.k8s.io', 'leases', 'namespace'),
].sort();

/**
 * What `warren migrate whereabouts` reads (it writes through the cluster tier, as the agent), and
 * what `warren migrate to-whereabouts` writes: whereabouts' objects, in its namespace.
 */
const MIGRATE = [
  ...needs(['list'], 'whereabouts.cni.cncf.io', 'ippools'),
  ...needs(['list'], 'whereabouts.cni.cncf.io', 'overlappingrangeipreservations'),
  ...needs(['get', 'create', 'update'], 'whereabouts.cni.cncf.io', 'ippools'),
  ...needs(['get', 'create', 'update'], 'whereabouts.cni.cncf.io', 'overlappingrangeipreservations'),
  ...needs(['list'], 'k8s.cni.cncf.io', 'network-attachment-definitions'),
  need('get', '', 'pods'),
].sort();

/** How each client-node call or API path appears in the code, and what it needs. */
const CALLS: ReadonlyArray<{ pattern: RegExp; needs: ReadonlyArray<string> }> = [
  // The pod and node sources list and watch these paths.
  { pattern: /'\/api\/v1\/pods'/, needs: needs(['list', 'watch'], '', 'pods') },
  { pattern: /'\/api\/v1\/nodes'/, needs: needs(['list', 'watch'], '', 'nodes') },
  // Every agent list-watches the reservations and patches its own entry of their status.
  {
    pattern: /'\/apis\/warren\.dev\/v1alpha1\/warrenreservations'/,
    needs: needs(['list', 'watch'], 'warren.dev', 'warrenreservations'),
  },
  {
    pattern: /`\/apis\/warren\.dev\/v1alpha1\/warrenreservations\/\$\{[^}]+\}\/status`/,
    needs: [need('patch', 'warren.dev', 'warrenreservations/status')],
  },
  // The sticky addresses' chore list-watches the StatefulSets (agent/kubernetes/sticky-release.ts).
  { pattern: /'\/apis\/apps\/v1\/statefulsets'/, needs: needs(['list', 'watch'], 'apps', 'statefulsets') },
  { pattern: /\.readNamespacedPod\(/, needs: [need('get', '', 'pods')] },
  { pattern: /\.readNode\(/, needs: [need('get', '', 'nodes')] },
  // The ADD planners' watches: namespaces (the pod directory, a GET on a miss) and WarrenPools.
  { pattern: /'\/api\/v1\/namespaces'/, needs: needs(['list', 'watch'], '', 'namespaces') },
  { pattern: /\.readNamespace\(/, needs: [need('get', '', 'namespaces')] },
  {
    pattern: /'\/apis\/warren\.dev\/v1alpha1\/warrenpools'/,
    needs: needs(['list', 'watch'], 'warren.dev', 'warrenpools'),
  },
  // KubeVirt's IPAMClaims: watched by every agent, one read on a cache miss, the status merge-patched.
  {
    pattern: /'\/apis\/k8s\.cni\.cncf\.io\/v1alpha1\/ipamclaims'/,
    needs: needs(['list', 'watch'], 'k8s.cni.cncf.io', 'ipamclaims'),
  },
  {
    pattern: /`\/apis\/k8s\.cni\.cncf\.io\/v1alpha1\/namespaces\/\$\{[^`]+\}\/ipamclaims\/\$\{[^`]+\}`/,
    needs: [need('get', 'k8s.cni.cncf.io', 'ipamclaims')],
  },
  // Discovery (is the group served?): open to any authenticated client, no rule needed.
  { pattern: /'\/apis\/k8s\.cni\.cncf\.io\/v1alpha1'/, needs: [] },
  { pattern: /`\$\{claimPath\(ref\)\}\/status`/, needs: [need('patch', 'k8s.cni.cncf.io', 'ipamclaims/status')] },
  { pattern: /\.createNamespacedEvent\(/, needs: [need('create', '', 'events')] },
  { pattern: /\.patchNamespacedEvent\(/, needs: [need('patch', '', 'events')] },
  // The migration's reader lists collections (never watches) and gets one pod.
  ...(['ippools', 'overlappingrangeipreservations'] as const).map((plural) => ({
    pattern: new RegExp(`'/apis/whereabouts\\.cni\\.cncf\\.io/v1alpha1/${plural}'`),
    needs: [need('list', 'whereabouts.cni.cncf.io', plural)],
  })),
  {
    pattern: /'\/apis\/k8s\.cni\.cncf\.io\/v1\/network-attachment-definitions'/,
    needs: [need('list', 'k8s.cni.cncf.io', 'network-attachment-definitions')],
  },
  // The way back (migrate to-whereabouts, kube-writes.ts) gets, creates and replaces whereabouts' objects.
  {
    pattern: /objectPath\(kind, namespace/,
    needs: ['ippools', 'overlappingrangeipreservations'].flatMap((plural) =>
      needs(['get', 'create', 'update'], 'whereabouts.cni.cncf.io', plural),
    ),
  },
  { pattern: /`\/api\/v1\/namespaces\/\$\{[^}]+\}\/pods\/\$\{[^}]+\}`/, needs: [need('get', '', 'pods')] },
  // The agent's core reads and Events on the store's client (src/sources/kubernetes/core-api.ts).
  { pattern: /`\/api\/v1\/namespaces\/\$\{[^}]+\}`/, needs: [need('get', '', 'namespaces')] },
  { pattern: /`\/api\/v1\/nodes\/\$\{[^}]+\}`/, needs: [need('get', '', 'nodes')] },
  { pattern: /`\/api\/v1\/namespaces\/\$\{[^}]+\}\/events`/, needs: [need('create', '', 'events')] },
  {
    pattern: /`\/api\/v1\/namespaces\/\$\{[^}]+\}\/events\/\$\{[^}]+\}`/,
    needs: [need('patch', '', 'events')],
  },
];
/** Any other client-node call on CoreV1Api would show up here and must be added to CALLS. */
const ANY_CALL =
  /\.(?:read|list|create|patch|replace|delete|watch)(?:Namespaced)?(?:Pod|Node|Event|Namespace|Secret|ConfigMap|Service|Endpoints?|Lease)\w*\(/g;
/** Any API path written in the code: each must be one of CALLS, or the Resource's own path builder. */
const ANY_PATH = /['`]\/apis?\/[^'`]*['`]/g;
const RESOURCE_PATH = /^`\/apis\/\$\{k\.group\}\/\$\{k\.version\}/;

/** The methods of `Resource` (src/store/kubernetes/resources.ts), each one request of one verb. */
const RESOURCE_VERBS: Record<string, string> = {
  create: 'create',
  get: 'get',
  replace: 'update',
  remove: 'delete',
  list: 'list',
  listAll: 'list',
  listAt: 'list',
  watch: 'watch',
};
/** Resource's methods that send no request (told of the client's state). */
const RESOURCE_QUIET = ['whenAccepted', 'whenBack'];
/** The names the kubernetes store holds its Resources by (fields, options, locals), and what each serves. */
const HOLDERS: Record<string, { group: string; plural: string; scope: Scope }> = {
  ranges: { group: 'warren.dev', plural: 'warrenranges', scope: 'cluster' },
  blocks: { group: 'warren.dev', plural: 'warrenblocks', scope: 'cluster' },
  publications: { group: 'warren.dev', plural: 'warrenblockpublications', scope: 'cluster' },
  requests: { group: 'warren.dev', plural: 'warrenaddressrequests', scope: 'cluster' },
  spaces: { group: 'warren.dev', plural: 'warrenaddressspaces', scope: 'cluster' },
  clusterState: { group: 'warren.dev', plural: 'warrenclusterstates', scope: 'cluster' },
  holdings: { group: 'warren.dev', plural: 'warrenaddressholdings', scope: 'cluster' },
  leases: { group: 'coordination.k8s.io', plural: 'leases', scope: 'namespace' },
  pools: { group: 'warren.dev', plural: 'warrenpools', scope: 'cluster' },
  nodes: { group: '', plural: 'nodes', scope: 'cluster' },
};

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** The code of a file without its comments, where paths are named as examples. */
function withoutComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
}

/** The text of a call's arguments, from just after its `(` to the matching `)`. */
function argumentsAt(text: string, open: number): string {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')' && --depth === 0) return text.slice(open + 1, i);
  }
  return text.slice(open + 1);
}

/** The calls the kubernetes store makes through Resource in one file. */
function resourceCalls(file: string, text: string): string[] {
  const found: string[] = [];
  const holderOf = (name: string) => {
    const holder = HOLDERS[name.replace(/^#/, '')];
    assert.ok(holder, `${file}: a Resource held as ${name}, a name this test does not know; add it to HOLDERS`);
    return holder;
  };
  // Each Resource made is held by a name of HOLDERS, of the resource it serves.
  for (const m of text.matchAll(/(#?\w+)\s*[:=]\s*new Resource\(\s*\w+\s*,\s*(\w+)\(\s*'?(\w*)/g)) {
    const [, name, how, plural] = m as unknown as [string, string, string, string];
    const holder = holderOf(name);
    if (how === 'leaseKind') assert.equal(holder.plural, 'leases', `${file}: ${name} holds Leases`);
    else if (how === 'coreKind') assert.deepEqual([holder.group, holder.plural], ['', plural], `${file}: ${name}`);
    else assert.deepEqual([how, plural], ['warrenKind', holder.plural], `${file}: ${name} holds ${holder.plural}`);
  }
  // A Resource handed on keeps its name.
  for (const m of text.matchAll(/(?:(\w+):|const (\w+) =) this\.(?:#o\.)?#?(\w+)[,;\n]/g)) {
    const [, key, local, from] = m as unknown as [string, string | undefined, string | undefined, string];
    // (A collection watch's `resource` is the one other name: attributed where the watch is made, above.)
    if (HOLDERS[from] !== undefined && key !== 'resource')
      assert.equal(key ?? local, from, `${file}: ${from} handed on under its own name`);
  }
  // A collection watch (collection-watch.ts) given a Resource lists it and watches it.
  for (const made of text.matchAll(/new KubeCollectionWatch(?:<[^(]*>)?\(/g)) {
    const args = argumentsAt(text, (made.index ?? 0) + made[0].length - 1);
    // A watch of one object of any Resource (tier-watches.ts `one`) is attributed where `one` is called, below.
    if (/\bresource,/.test(args) && /\bone<T>\(resource: Resource/.test(text)) continue;
    const given = /\bresource:\s*(?:this\.(?:#o\.)?)?(#?\w+)/.exec(args);
    assert.ok(given, `${file}: a KubeCollectionWatch made without a Resource this test can name`);
    const holder = holderOf(given[1] as string);
    for (const verb of ['list', 'watch']) found.push(need(verb, holder.group, holder.plural, holder.scope));
  }
  for (const m of text.matchAll(/(?<![\w$])(#?\w+)\.(\w+)\(/g)) {
    const [, name, method] = m as unknown as [string, string, string];
    if (HOLDERS[name.replace(/^#/, '')] === undefined || !(method in RESOURCE_VERBS)) continue;
    const holder = holderOf(name);
    const status = method === 'replace' && argumentsAt(text, (m.index ?? 0) + m[0].length - 1).includes("'status'");
    found.push(
      need(RESOURCE_VERBS[method] as string, holder.group, `${holder.plural}${status ? '/status' : ''}`, holder.scope),
    );
  }
  // A Resource handed to the tier's watch of one object (tier-watches.ts `one`) is listed and watched.
  for (const m of text.matchAll(/#?watches\.one\(\s*(?:this\.)?(?:#?o\.)?(#?\w+)/g)) {
    const holder = holderOf(m[1] as string);
    found.push(...needs(['list', 'watch'], holder.group, holder.plural, holder.scope));
  }
  return found;
}

/** What the code calls: the agent's and the migration's (src/cli/migrate/). */
function callsOfCode(): { agent: Set<string>; migrate: Set<string> } {
  const agent = new Set<string>();
  const migrate = new Set<string>();
  for (const path of sources(join(REPO, 'src'))) {
    const file = relative(REPO, path);
    const text = readFileSync(path, 'utf8');
    const into = file.startsWith('src/cli/migrate/') ? migrate : agent;
    for (const call of CALLS) if (call.pattern.test(text)) for (const n of call.needs) into.add(n);
    for (const m of withoutComments(text).matchAll(ANY_PATH))
      assert.ok(
        RESOURCE_PATH.test(m[0]) || CALLS.some((c) => c.pattern.test(m[0])),
        `${file}: ${m[0]} is an API path this test does not know; add it to CALLS with the verbs it needs`,
      );
    if (text.includes('@kubernetes/client-node'))
      for (const m of text.matchAll(ANY_CALL))
        assert.ok(
          CALLS.some((c) => c.pattern.test(m[0])),
          `${file}: ${m[0]} is a Kubernetes API call this test does not know; add it to CALLS with the verb it needs`,
        );
    if (file.startsWith('src/store/kubernetes/') || /from '[./]*(?:store\/kubernetes\/)?resources\.ts'/.test(text))
      for (const n of resourceCalls(file, text)) into.add(n);
  }
  return { agent, migrate };
}

/** Each method of Resource (`#` for a private one) and the text of its body. */
function resourceMethods(): Map<string, string> {
  const text = readFileSync(join(REPO, 'src', 'store', 'kubernetes', 'resources.ts'), 'utf8');
  const body = text.slice(text.indexOf('export class Resource'));
  const starts = [...body.matchAll(/^ {2}(?:async )?(#?[a-zA-Z]\w*)\(/gm)].filter((m) => m[1] !== 'constructor');
  return new Map(
    starts.map((m, i) => [m[1] as string, body.slice(m.index, starts[i + 1]?.index ?? body.length)] as const),
  );
}

/** A method's body with the bodies of the methods it calls, and theirs: what one call of it may send. */
function reach(methods: Map<string, string>, method: string, seen = new Set<string>()): string {
  seen.add(method);
  const body = methods.get(method) ?? '';
  const callees = [...body.matchAll(/this\.(#?\w+)\(/g)].map((m) => m[1] as string);
  return [body, ...callees.filter((c) => methods.has(c) && !seen.has(c)).map((c) => reach(methods, c, seen))].join(
    '\n',
  );
}

const documents = documentsOf(listedFiles(''));
const clusterRole = (name: string) => theOne<IClusterRole>(documents, 'ClusterRole', name);
const account = theOne<IServiceAccount>(documents, 'ServiceAccount');

/** The rights a role's rules grant, one per verb and resource. */
function granted(role: IClusterRole | IRole, scope: Scope): string[] {
  return (role.rules ?? []).flatMap((rule) => {
    assert.equal(rule.resourceNames, undefined, `${role.metadata?.name}: rights on every object of a kind`);
    assert.equal(rule.nonResourceURLs, undefined, `${role.metadata?.name}: no URLs`);
    return (rule.apiGroups ?? []).flatMap((group) =>
      (rule.resources ?? []).flatMap((resource) => rule.verbs.map((verb) => need(verb, group, resource, scope))),
    );
  });
}

/** The roles bound to the agent's ServiceAccount: ClusterRoles cluster-wide, Roles in their namespace. */
function agentRights(docs: readonly Document[] = documents): string[] {
  const sa = theOne<IServiceAccount>(docs, 'ServiceAccount');
  const subject = { kind: 'ServiceAccount', name: sa.metadata?.name, namespace: sa.metadata?.namespace };
  const bindings = docs.filter((d) => d.kind === 'ClusterRoleBinding' || d.kind === 'RoleBinding') as (Document &
    (IClusterRoleBinding | IRoleBinding))[];
  return bindings.flatMap((binding) => {
    assert.deepEqual(binding.subjects, [subject], `${binding.metadata?.name} binds the agent's ServiceAccount`);
    assert.equal(binding.roleRef.apiGroup, 'rbac.authorization.k8s.io');
    if (binding.kind === 'RoleBinding') {
      const role = theOne<IRole>(docs, 'Role', binding.roleRef.name);
      assert.equal(binding.roleRef.kind, 'Role', `${binding.metadata?.name} binds a Role of its namespace`);
      assert.equal(role.metadata?.namespace, binding.metadata?.namespace);
      assert.equal(role.metadata?.namespace, sa.metadata?.namespace, "the Role is in the agent's namespace");
      return granted(role, 'namespace');
    }
    assert.equal(binding.roleRef.kind, 'ClusterRole');
    return granted(theOne<IClusterRole>(docs, 'ClusterRole', binding.roleRef.name), 'cluster');
  });
}

describe('Resource (src/store/kubernetes/resources.ts), through which the kubernetes store calls', () => {
  it('has exactly the methods this test maps to verbs, each sending that verb (itself or through its own helpers)', () => {
    const methods = resourceMethods();
    const exposed = [...methods.keys()].filter((m) => !m.startsWith('#'));
    assert.deepEqual(exposed.sort(), [...Object.keys(RESOURCE_VERBS), ...RESOURCE_QUIET].sort());
    for (const method of RESOURCE_QUIET) {
      const sent = [...reach(methods, method).matchAll(/'(create|get|list|watch|update|patch|delete)'/g)];
      assert.deepEqual(sent, [], `Resource.${method} sends nothing`);
    }
    for (const method of exposed.filter((m) => !RESOURCE_QUIET.includes(m))) {
      const verb = RESOURCE_VERBS[method] as string;
      const sent = new Set(
        [...reach(methods, method).matchAll(/'(create|get|list|watch|update|patch|delete)'/g)].map((m) => m[1]),
      );
      assert.deepEqual([...sent], [verb], `Resource.${method} sends ${verb} requests only`);
    }
  });
});

describe("the agent's rights", () => {
  it('are exactly the calls the code makes, as the table lists them', () => {
    assert.deepEqual([...callsOfCode().agent].sort(), AGENT);
  });

  it('are granted exactly by the roles bound to its ServiceAccount, Leases only in its own namespace', () => {
    const rights = agentRights();
    assert.equal(new Set(rights).size, rights.length, 'no right granted twice');
    assert.deepEqual(rights.sort(), AGENT);
    for (const role of documents.filter((d) => d.kind === 'ClusterRole'))
      assert.equal((role as IClusterRole).aggregationRule, undefined, `${role.metadata?.name} aggregates nothing`);
  });

  it('ClusterRole warren: pods get/list/watch, events create/patch, nodes get/list/watch, whatever the store', () => {
    assert.deepEqual(
      granted(clusterRole('warren'), 'cluster').sort(),
      AGENT.filter((n) => / \/\w+ @/.test(n)),
    );
  });

  it("run as the DaemonSet's ServiceAccount", () => {
    const daemonSet = theOne<{ spec: { template: { spec: { serviceAccountName?: string } } } }>(documents, 'DaemonSet');
    assert.equal(daemonSet.spec.template.spec.serviceAccountName, account.metadata?.name);
  });
});

describe('ClusterRole warren-migrate', () => {
  it('is what the migration calls, as the table lists it', () => {
    assert.deepEqual([...callsOfCode().migrate].sort(), MIGRATE);
  });

  it("grants exactly what the migration reads beyond the agent's rights, and is bound to no one", () => {
    const agent = new Set(agentRights());
    assert.deepEqual(
      granted(clusterRole('warren-migrate'), 'cluster').sort(),
      MIGRATE.filter((n) => !agent.has(n)),
    );
    const bound = documents.filter((d) => (d as { roleRef?: { name?: string } }).roleRef?.name === 'warren-migrate');
    assert.deepEqual(bound, [], 'bound by hand for the migration only (README)');
  });
});

describe("each overlay's rights (deploy/overlays/*)", () => {
  /** What every agent calls whatever its store: its sources and its Events (ClusterRole warren). */
  const everyStore = AGENT.filter((n) => / \/\w+ @/.test(n));
  for (const name of OVERLAYS) {
    it(`${name}: grants nothing the code does not call, and everything every store calls`, {
      skip: skipWithoutKubectl,
    }, async () => {
      const rights = agentRights(await render(`overlays/${name}`));
      assert.equal(new Set(rights).size, rights.length, 'no right granted twice');
      assert.deepEqual(
        rights.filter((r) => !AGENT.includes(r)),
        [],
        'every right granted is one the code calls',
      );
      assert.deepEqual(
        everyStore.filter((r) => !rights.includes(r)),
        [],
        'the sources every store runs are granted',
      );
      // The store overlays run no kubernetes store; the others run it and need all of it.
      if (!(STORE_OVERLAYS as readonly string[]).includes(name)) assert.deepEqual(rights.sort(), AGENT);
    });
  }
});

/**
 * Warren's custom resource definitions (deploy/crds/) as the API server takes them: each file is
 * one apiextensions.k8s.io/v1 CustomResourceDefinition, valid against that kind's schema
 * (kubernetes-models) with no field the typed client drops; of group warren.dev, version v1alpha1,
 * cluster-scoped, named as the API server requires (`<plural>.<group>`); and with a structural
 * schema, which apiextensions v1 refuses to register without (every node typed, every object with
 * its properties, every array with its items, every required field declared), so that nothing the
 * agent writes is pruned unseen. Printer columns point at fields the schema has.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { dumpYaml, loadAllYaml } from '@kubernetes/client-node';
import type { ICustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import type { ICustomResourceDefinitionVersion } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinitionVersion';
import type { IJSONSchemaProps } from 'kubernetes-models/apiextensions.k8s.io/v1/JSONSchemaProps';
import { DEPLOY, assertValid, documentsOf, jsYaml, listedFiles } from './deploy-files.ts';

const GROUP = 'warren.dev';
const VERSION = 'v1alpha1';
/** The kinds of the cluster tier (src/store/tiered/cluster-tier.ts), each in its own file named after its plural. */
const KINDS = [
  'WarrenAddressHolding',
  'WarrenAddressRequest',
  'WarrenAddressSpace',
  'WarrenBlock',
  'WarrenBlockPublication',
  'WarrenClusterState',
  'WarrenRange',
];
/**
 * Kinds living in their holder's namespace (so its deletion takes them), with a status (the pods
 * using them, as nodes report them): holdings (src/store/cluster-holdings.ts).
 */
const NAMESPACED = ['WarrenAddressHolding'];
/** The kinds operators write (each with a status the agents keep), beside the cluster tier's. */
const OPERATOR_KINDS = ['WarrenPool', 'WarrenReservation'];

const files = readdirSync(join(DEPLOY, 'crds'))
  .filter((name) => /\.ya?ml$/.test(name) && name !== 'kustomization.yaml')
  .map((name) => `crds/${name}`)
  .sort();
const documents = documentsOf(files);
const crds = documents as unknown as (ICustomResourceDefinition & { file: string })[];

/** The schema node at a dotted path (`.spec.pool`), or undefined when the schema has none. */
function nodeAt(schema: IJSONSchemaProps, path: string): IJSONSchemaProps | undefined {
  let node: IJSONSchemaProps | undefined = schema;
  for (const part of path.replace(/^\./, '').split('.')) node = node?.properties?.[part];
  return node;
}

/** Every way a schema node is not structural, as apiextensions v1 judges it (in its simplest form). */
function structuralFaults(node: IJSONSchemaProps, at: string): string[] {
  if (node['x-kubernetes-preserve-unknown-fields'] === true || node['x-kubernetes-int-or-string'] === true) return [];
  const faults: string[] = [];
  if (node.type === undefined) faults.push(`${at} has no type`);
  if (node.type === 'object') {
    if (node.properties === undefined && node.additionalProperties === undefined)
      faults.push(`${at} is an object with neither properties nor additionalProperties`);
    for (const name of node.required ?? [])
      if (node.properties?.[name] === undefined) faults.push(`${at} requires ${name}, which it does not declare`);
    for (const [name, child] of Object.entries(node.properties ?? {}))
      faults.push(...structuralFaults(child, `${at}.${name}`));
    if (typeof node.additionalProperties === 'object')
      faults.push(...structuralFaults(node.additionalProperties, `${at}[*]`));
  }
  if (node.type === 'array') {
    if (node.items === undefined || Array.isArray(node.items))
      faults.push(`${at} is an array without one items schema`);
    else faults.push(...structuralFaults(node.items as IJSONSchemaProps, `${at}[]`));
  }
  return faults;
}

function theVersion(crd: ICustomResourceDefinition): ICustomResourceDefinitionVersion {
  assert.equal(crd.spec.versions.length, 1, `${crd.metadata?.name} has one version`);
  return crd.spec.versions[0] as ICustomResourceDefinitionVersion;
}

describe("Warren's custom resource definitions (deploy/crds/)", () => {
  it('are one CustomResourceDefinition per file, one per kind of the cluster tier, each listed in deploy/', () => {
    assert.equal(documents.length, files.length);
    for (const doc of documents) assert.equal(doc.kind, 'CustomResourceDefinition', doc.file);
    assert.deepEqual(crds.map((crd) => crd.spec.names.kind).sort(), [...KINDS, ...OPERATOR_KINDS].sort());
    for (const crd of crds) assert.equal(crd.file, `crds/${crd.spec.names.plural}.yaml`);
    const listed = new Set(listedFiles(''));
    for (const file of files) assert.ok(listed.has(file), `deploy/kustomization.yaml lists ${file}`);
  });

  it('are valid apiextensions.k8s.io/v1 objects, with no field the typed client drops', () => {
    for (const doc of documents) {
      assert.equal(doc.apiVersion, 'apiextensions.k8s.io/v1', doc.file);
      assertValid(doc);
      const text = readFileSync(join(DEPLOY, doc.file), 'utf8');
      const [typed] = loadAllYaml(text);
      assert.deepEqual(jsYaml.loadAll(dumpYaml(typed))[0], jsYaml.loadAll(text)[0], `${doc.file}: every field kept`);
    }
  });

  it('are of group warren.dev, cluster-scoped, named <plural>.<group>, with the names kubectl shows', () => {
    for (const crd of crds) {
      const { group, scope, names } = crd.spec;
      assert.equal(group, GROUP, crd.file);
      assert.equal(scope, NAMESPACED.includes(names.kind) ? 'Namespaced' : 'Cluster', crd.file);
      assert.equal(crd.metadata?.name, `${names.plural}.${GROUP}`, crd.file);
      assert.equal(names.plural, `${names.kind.toLowerCase()}s`, crd.file);
      assert.equal(names.singular, names.kind.toLowerCase(), crd.file);
      assert.equal(names.listKind, `${names.kind}List`, crd.file);
    }
  });

  it('serve and store exactly one version, v1alpha1', () => {
    for (const crd of crds) {
      const version = theVersion(crd);
      assert.equal(version.name, VERSION, crd.file);
      assert.equal(version.served, true, crd.file);
      assert.equal(version.storage, true, crd.file);
    }
  });

  it('keep allocations out of the claims: no status anywhere, a block holds its claim alone', () => {
    for (const crd of crds.filter((c) => KINDS.includes(c.spec.names.kind))) {
      const version = theVersion(crd);
      assert.equal(version.subresources?.status, undefined, `${crd.file}: status subresource`);
      if (NAMESPACED.includes(crd.spec.names.kind)) continue;
      assert.equal(version.schema?.openAPIV3Schema?.properties?.status, undefined, crd.file);
    }
    const block = crds.find((crd) => crd.spec.names.kind === 'WarrenBlock');
    const spec = block === undefined ? undefined : nodeAt(theVersion(block).schema?.openAPIV3Schema ?? {}, '.spec');
    // A claim and its handover to a borrower (offeredTo, takenFrom: allocator/lending/handover.ts).
    assert.deepEqual(Object.keys(spec?.properties ?? {}).sort(), ['cidr', 'node', 'offeredTo', 'pool', 'takenFrom']);
  });

  it("give an operator's kind a status subresource (the agents write only it) and a spec the agents never write", () => {
    for (const crd of crds.filter((c) => OPERATOR_KINDS.includes(c.spec.names.kind))) {
      const version = theVersion(crd);
      assert.deepEqual(version.subresources?.status, {}, `${crd.file}: status subresource`);
      assert.equal(version.schema?.openAPIV3Schema?.properties?.status?.type, 'object', crd.file);
    }
    const pool = crds.find((crd) => crd.spec.names.kind === 'WarrenPool');
    const spec = pool === undefined ? undefined : nodeAt(theVersion(pool).schema?.openAPIV3Schema ?? {}, '.spec');
    assert.deepEqual(Object.keys(spec?.properties ?? {}).sort(), [
      'blockSize',
      'namespaceSelector',
      'nodeSelector',
      'ranges',
      'routes',
      'sticky',
    ]);
    const range = spec?.properties?.ranges?.items as IJSONSchemaProps | undefined;
    // Whereabouts' keys, as a network config's ipRanges entry has them.
    assert.deepEqual(Object.keys(range?.properties ?? {}).sort(), [
      'block_size',
      'enable_l3',
      'exclude',
      'gateway',
      'range',
      'range_end',
      'range_start',
    ]);
  });

  it('have structural schemas, which apiextensions v1 requires, with a required spec', () => {
    for (const crd of crds) {
      const schema = theVersion(crd).schema?.openAPIV3Schema;
      assert.ok(schema !== undefined, `${crd.file} has a schema`);
      assert.deepEqual(structuralFaults(schema, crd.spec.names.kind), [], crd.file);
      assert.ok((nodeAt(schema, '.spec')?.required ?? []).length > 0, `${crd.file}: spec requires what Warren reads`);
    }
  });

  it('bound every string and list, so that no object grows past what the API server stores', () => {
    const unbounded = (node: IJSONSchemaProps, at: string): string[] => [
      ...(node.type === 'string' && node.maxLength === undefined ? [`${at} has no maxLength`] : []),
      ...(node.type === 'array' && node.maxItems === undefined ? [`${at} has no maxItems`] : []),
      ...Object.entries(node.properties ?? {}).flatMap(([name, child]) => unbounded(child, `${at}.${name}`)),
      ...(node.items !== undefined && !Array.isArray(node.items)
        ? unbounded(node.items as IJSONSchemaProps, `${at}[]`)
        : []),
    ];
    for (const crd of crds) {
      const schema = theVersion(crd).schema?.openAPIV3Schema as IJSONSchemaProps;
      assert.deepEqual(unbounded(schema, crd.spec.names.kind), [], crd.file);
    }
  });

  it('print columns from fields the schema has, of the type it gives them', () => {
    for (const crd of crds) {
      const version = theVersion(crd);
      const schema = version.schema?.openAPIV3Schema as IJSONSchemaProps;
      for (const column of version.additionalPrinterColumns ?? []) {
        if (column.jsonPath === '.metadata.creationTimestamp') {
          assert.equal(column.type, 'date', `${crd.file}: ${column.name}`);
          continue;
        }
        const node = nodeAt(schema, column.jsonPath);
        assert.ok(
          node !== undefined,
          `${crd.file}: column ${column.name} reads ${column.jsonPath}, which is in the schema`,
        );
        assert.equal(column.type, node.type, `${crd.file}: column ${column.name}'s type`);
      }
    }
  });
});

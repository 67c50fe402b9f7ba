/**
 * deploy/ as the tests of test/deploy/ read it: the files a kustomization lists (read without
 * kubectl, so every check but the rendering itself runs anywhere), their YAML documents as written,
 * and the schema of each kind deploy/ may hold (kubernetes-models), by which a document is valid.
 */
import assert from 'node:assert/strict';
import { accessSync, constants, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { DaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { CHILD_PATH, REPO, run } from '../helpers/processes.ts';

export const DEPLOY = join(REPO, 'deploy');
export const NAMESPACE = 'warren';

/** The overlays of deploy/ (deploy/overlays/NAME), each a store other than the default. */
/** The overlays of base/ that put the agent on another store. */
export const STORE_OVERLAYS = ['sqlite-per-node', 'etcd'] as const;
/** Every overlay: the store overlays, and those of the default (deploy/) for a setting around it. */
export const OVERLAYS = [...STORE_OVERLAYS, 'multus'] as const;

/** The schema of each kind deploy/ may hold; any other kind is a mistake. */
export const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/Namespace': Namespace,
  'v1/ServiceAccount': ServiceAccount,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'apiextensions.k8s.io/v1/CustomResourceDefinition': CustomResourceDefinition,
  'apps/v1/DaemonSet': DaemonSet,
};

// The YAML parser loadAllYaml itself uses, resolved as @kubernetes/client-node resolves it: the
// documents as written, to compare with what the typed objects keep (they drop unknown fields).
export const jsYaml = createRequire(import.meta.resolve('@kubernetes/client-node'))('js-yaml') as {
  load(text: string): unknown;
  loadAll(text: string): unknown[];
};

export interface Document {
  /** The file it is in, relative to deploy/. */
  readonly file: string;
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata?: { readonly name?: string; readonly namespace?: string };
}

export interface Kustomization {
  readonly resources?: string[];
  readonly bases?: string[];
  readonly patchesStrategicMerge?: string[];
}

/** The kustomization.yaml of a directory of deploy/ (`''` for deploy/ itself). */
export function kustomization(dir: string): Kustomization {
  return jsYaml.load(readFileSync(join(DEPLOY, dir, 'kustomization.yaml'), 'utf8')) as Kustomization;
}

/** The files a kustomization lists as resources, relative to deploy/. */
export function listedFiles(dir: string): string[] {
  return (kustomization(dir).resources ?? []).map((file) => relative(DEPLOY, join(DEPLOY, dir, file)));
}

/** The YAML documents of files (relative to deploy/), each with its file. */
export function documentsOf(files: readonly string[]): Document[] {
  return files.flatMap((file) =>
    (jsYaml.loadAll(readFileSync(join(DEPLOY, file), 'utf8')) as Omit<Document, 'file'>[])
      .filter((doc) => doc !== null)
      .map((doc) => ({ ...doc, file })),
  );
}

/** The YAML documents of a text (kubectl kustomize's output), each marked as coming from `from`. */
export function documentsOfText(text: string, from: string): Document[] {
  return (jsYaml.loadAll(text) as Omit<Document, 'file'>[])
    .filter((doc) => doc !== null)
    .map((doc) => ({ ...doc, file: from }));
}

/** Asserts a document is of a kind deploy/ holds and valid against that kind's schema. */
export function assertValid(doc: Document): void {
  const { file, ...object } = doc;
  const Model = MODELS[`${object.apiVersion}/${object.kind}`];
  assert.ok(Model, `${file}: ${object.apiVersion} ${object.kind} is a kind deploy/ holds`);
  assert.doesNotThrow(() => new Model(object as never).validate(), `${file}: ${object.kind} ${object.metadata?.name}`);
}

/** The one document of `kind` named `name` (any name when not given) among `documents`. */
export function theOne<T>(documents: readonly Document[], kind: string, name?: string): T {
  const found = documents.filter((doc) => doc.kind === kind && (name === undefined || doc.metadata?.name === name));
  assert.equal(found.length, 1, `one ${kind}${name === undefined ? '' : ` ${name}`} among ${documents[0]?.file}...`);
  return found[0] as unknown as T;
}

/** kubectl on the tests' PATH (Debian's kubernetes-client: scripts/setup.sh), if any. */
export const kubectl = CHILD_PATH.split(':')
  .map((dir) => join(dir, 'kubectl'))
  .find((path) => {
    try {
      accessSync(path, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
/** The skip of a test that renders deploy/ with kubectl. */
export const skipWithoutKubectl =
  kubectl === undefined ? 'no kubectl on PATH (scripts/setup.sh installs kubernetes-client)' : false;

/** `kubectl kustomize` of a directory of deploy/, as documents. */
export async function render(dir: string): Promise<Document[]> {
  const r = await run(kubectl as string, ['kustomize', join(DEPLOY, dir)]);
  assert.equal(r.code, 0, `kubectl kustomize deploy/${dir}: ${r.stderr}`);
  return documentsOfText(r.stdout, `kubectl kustomize deploy/${dir}`);
}

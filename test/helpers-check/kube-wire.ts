/**
 * What the tests of the fake Kubernetes API's custom resources share: one request over node:https
 * trusting the fake's CA (as a client on the wire sees it: status, headers, text), a watch read
 * line by line, and the two CRDs of the recorded answers (IPPool, namespaced; IPAMBlock, cluster).
 */
import type { ClientRequest } from 'node:http';
import { request } from 'node:https';
import type { TestContext } from 'node:test';
import {
  type FakeKubeApi,
  type FakeKubeApiOptions,
  type KubeObject,
  startFakeKubeApi,
} from '../helpers/fake-kube-api.ts';
import { waitFor } from '../helpers/processes.ts';

export interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  // biome-ignore lint/suspicious/noExplicitAny: a test reads arbitrary JSON fields of an answer
  readonly json: any;
}

export interface CallOptions {
  readonly contentType?: string;
  readonly token?: string | null;
  readonly userAgent?: string;
  /** Sent as is (a string) or as JSON. */
  readonly body?: unknown;
}

export function call(fake: FakeKubeApi, method: string, path: string, options: CallOptions = {}): Promise<Answer> {
  const token = options.token === undefined ? fake.token : options.token;
  const body =
    options.body === undefined
      ? undefined
      : typeof options.body === 'string'
        ? options.body
        : JSON.stringify(options.body);
  const headers: Record<string, string> = { 'User-Agent': options.userAgent ?? 'wire-test/1.0' };
  if (token !== null) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) {
    headers['Content-Type'] = options.contentType ?? 'application/json';
    // node sends a DELETE's body unframed unless told its length.
    headers['Content-Length'] = String(Buffer.byteLength(body));
  }
  return new Promise((resolveAnswer, reject) => {
    const req = request(`${fake.url}${path}`, { method, ca: fake.caPem, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolveAnswer({ status: res.statusCode ?? 0, headers: res.headers, text, json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

export interface WatchStream {
  readonly status: number;
  /** Every event line received so far, parsed. */
  // biome-ignore lint/suspicious/noExplicitAny: events hold arbitrary objects
  readonly events: any[];
  /** Resolves when the server ends the stream. */
  readonly ended: Promise<void>;
  close(): void;
}

/** Opens a watch; resolves when the 200 (or another status) arrives. */
export function openWatch(fake: FakeKubeApi, path: string): Promise<WatchStream> {
  return new Promise((resolveStream, reject) => {
    let req: ClientRequest | undefined;
    req = request(
      `${fake.url}${path}`,
      { ca: fake.caPem, headers: { Authorization: `Bearer ${fake.token}` } },
      (res) => {
        const events: unknown[] = [];
        let buffer = '';
        const ended = new Promise<void>((resolveEnd) => {
          res.on('end', resolveEnd);
          res.on('close', resolveEnd);
          res.on('error', () => resolveEnd());
        });
        res.on('data', (chunk: Buffer) => {
          buffer += chunk.toString('utf8');
          let newline = buffer.indexOf('\n');
          while (newline !== -1) {
            events.push(JSON.parse(buffer.slice(0, newline)));
            buffer = buffer.slice(newline + 1);
            newline = buffer.indexOf('\n');
          }
        });
        resolveStream({ status: res.statusCode ?? 0, events, ended, close: () => req?.destroy() });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

export const eventsAtLeast = (what: string, stream: WatchStream, count: number) =>
  waitFor(what, () => (stream.events.length >= count ? true : undefined));

export async function startedWith(t: TestContext, options: FakeKubeApiOptions = {}): Promise<FakeKubeApi> {
  const fake = await startFakeKubeApi({ crds: [IPPOOL_CRD, IPAMBLOCK_CRD], ...options });
  t.after(() => fake.stop());
  return fake;
}

/** §1's IPPool, namespaced. */
export const IPPOOL_CRD: KubeObject = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'ippools.ipam.example.com' },
  spec: {
    group: 'ipam.example.com',
    scope: 'Namespaced',
    names: { plural: 'ippools', singular: 'ippool', kind: 'IPPool', listKind: 'IPPoolList', shortNames: ['ipp'] },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        subresources: { status: {} },
        additionalPrinterColumns: [
          { name: 'CIDR', type: 'string', jsonPath: '.spec.cidr' },
          { name: 'Size', type: 'integer', jsonPath: '.spec.size' },
          { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
        ],
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: {
                type: 'object',
                required: ['cidr'],
                properties: {
                  cidr: { type: 'string', pattern: '^[0-9.]+/[0-9]+$' },
                  size: { type: 'integer', minimum: 1, maximum: 1024 },
                  allocations: { type: 'object', additionalProperties: { type: 'string' } },
                  extra: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                },
              },
              status: { type: 'object', properties: { used: { type: 'integer' }, note: { type: 'string' } } },
            },
          },
        },
      },
    ],
  },
};

/** The cluster-scoped IPAMBlock of the recorded answers. */
export const IPAMBLOCK_CRD: KubeObject = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'ipamblocks.ipam.example.com' },
  spec: {
    group: 'ipam.example.com',
    scope: 'Cluster',
    names: { plural: 'ipamblocks', singular: 'ipamblock', kind: 'IPAMBlock', listKind: 'IPAMBlockList' },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              spec: {
                type: 'object',
                properties: {
                  cidr: { type: 'string', pattern: '^[0-9.]+/[0-9]+$' },
                  affinity: { type: 'string' },
                  unallocated: { type: 'array', items: { type: 'integer' } },
                  attributes: { type: 'object', additionalProperties: { type: 'string' } },
                  blob: { type: 'string' },
                  extra: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                },
              },
              status: { type: 'object', properties: { used: { type: 'integer' } } },
            },
          },
        },
      },
    ],
  },
};

export const POOLS = '/apis/ipam.example.com/v1/namespaces/default/ippools';
export const BLOCKS = '/apis/ipam.example.com/v1/ipamblocks';

export function block(
  name: string,
  labels: Record<string, string> = {},
  spec: Record<string, unknown> = {},
): KubeObject {
  return {
    apiVersion: 'ipam.example.com/v1',
    kind: 'IPAMBlock',
    metadata: { name, labels },
    spec: { cidr: '10.0.1.0/26', affinity: 'host:n1', ...spec },
  };
}

/** An object without its managedFields, as the recorded bodies show them ("managedFields trimmed"). */
export function trimmed(object: KubeObject): KubeObject {
  const { managedFields: _m, ...metadata } = object.metadata;
  return { ...object, metadata };
}

/** Whether every object in `value` has its keys in sorted order (how custom resources travel). */
export function keysSorted(value: unknown): boolean {
  if (Array.isArray(value)) return value.every(keysSorted);
  if (typeof value !== 'object' || value === null) return true;
  const keys = Object.keys(value);
  return keys.every((key, i) => i === 0 || (keys[i - 1] as string) < key) && Object.values(value).every(keysSorted);
}

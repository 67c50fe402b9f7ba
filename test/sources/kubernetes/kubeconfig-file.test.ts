/**
 * Warren's own kubeconfig reader (kubeconfig-file.ts) and the credentials it gives
 * (kube-credentials.ts): what kubectl reads of a kubeconfig is read the same way (current-context,
 * CA and client certificate by file or inline, relative paths from the kubeconfig's directory,
 * token, tokenFile, basic auth, insecure-skip-tls-verify), what the agent does not do is refused by
 * its key (exec, auth-provider, proxy-url), and any text at all — fuzzed — is either a selection or
 * an INVALID_CONFIG that names the file, never another error.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { isWarrenError } from '../../../src/core/errors.ts';
import { KubeCredentials, REREAD_MS } from '../../../src/sources/kubernetes/kube-credentials.ts';
import { parseKubeconfig } from '../../../src/sources/kubernetes/kubeconfig-file.ts';
import { tempDir } from '../../helpers/processes.ts';

const PATH = '/etc/warren/kubeconfig';
const DIR = '/etc/warren';

/** A valid kubeconfig with one context, `cluster` and `user` merged into its entries. */
function kubeconfig(
  cluster: Record<string, unknown> = {},
  user: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'ctx',
    contexts: [{ name: 'ctx', context: { cluster: 'c1', user: 'u1' } }],
    clusters: [{ name: 'c1', cluster: { server: 'https://10.0.0.1:6443', ...cluster } }],
    users: [{ name: 'u1', user: { token: 't0k3n', ...user } }],
  };
}

const parse = (document: unknown) => parseKubeconfig(JSON.stringify(document), PATH, DIR);

function assertInvalid(run: () => unknown, ...mentions: RegExp[]): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(isWarrenError(error, 'INVALID_CONFIG'), String(error));
    assert.match(error.message, new RegExp(PATH));
    for (const mention of mentions) assert.match(error.message, mention);
    return true;
  });
}

async function applied(credentials: KubeCredentials): Promise<RequestOptions & { headers: Record<string, string> }> {
  const options: RequestOptions = {};
  await credentials.applyToHTTPSOptions(options);
  return options as RequestOptions & { headers: Record<string, string> };
}

describe('parseKubeconfig', () => {
  it('reads YAML as kubectl writes it: the current context, its cluster and its user', () => {
    const yaml = [
      'apiVersion: v1',
      'kind: Config',
      'current-context: prod',
      'clusters:',
      '- name: other',
      '  cluster: {server: "not a url"}',
      '- name: prod',
      '  cluster:',
      '    server: https://api.example:6443',
      '    certificate-authority: ca.crt',
      '    insecure-skip-tls-verify: false',
      '    tls-server-name: kubernetes',
      'contexts:',
      '- name: prod',
      '  context: {cluster: prod, user: admin, namespace: warren}',
      'users:',
      '- name: admin',
      '  user:',
      '    client-certificate-data: Y2VydA==',
      '    client-key: keys/admin.key',
    ].join('\n');
    const selection = parseKubeconfig(yaml, PATH, DIR);
    assert.deepEqual(selection, {
      context: 'prod',
      cluster: {
        name: 'prod',
        server: 'https://api.example:6443',
        ca: { file: '/etc/warren/ca.crt' },
        insecureSkipTlsVerify: false,
        tlsServerName: 'kubernetes',
      },
      user: {
        name: 'admin',
        clientCertificate: { data: Buffer.from('cert') },
        clientKey: { file: '/etc/warren/keys/admin.key' },
      },
    });
  });

  it('refuses credential plugins and a proxy by the key that asks for them', () => {
    assertInvalid(() => parse(kubeconfig({}, { exec: { command: 'aws' } })), /users\["u1"\]\.user\.exec/, /token/);
    assertInvalid(() => parse(kubeconfig({}, { 'auth-provider': { name: 'oidc' } })), /user\.auth-provider/);
    assertInvalid(
      () => parse(kubeconfig({ 'proxy-url': 'http://proxy:3128' })),
      /clusters\["c1"\]\.cluster\.proxy-url/,
    );
  });

  it('names what is missing or wrong', () => {
    assertInvalid(() => parse({ ...kubeconfig(), 'current-context': undefined }), /no current-context/);
    assertInvalid(() => parse({ ...kubeconfig(), 'current-context': 'nope' }), /no context named "nope"/);
    assertInvalid(() => parse({ ...kubeconfig(), clusters: [] }), /no cluster named "c1"/);
    assertInvalid(() => parse({ ...kubeconfig(), users: {} }), /at users, not a list/);
    assertInvalid(() => parse(kubeconfig({ server: 'ftp://x' })), /no valid server URL/, /cluster\.server/);
    assertInvalid(() => parse(kubeconfig({ server: 6443 })), /cluster\.server, not a string/);
    assertInvalid(
      () => parse(kubeconfig({ 'certificate-authority-data': '%%%' })),
      /certificate-authority-data that is not base64/,
    );
    assertInvalid(
      () => parse(kubeconfig({ 'certificate-authority': 'a', 'certificate-authority-data': 'Y2E=' })),
      /sets both/,
    );
    assertInvalid(() => parse(kubeconfig({}, { 'client-certificate': 'c.crt' })), /client-key: both are needed/);
    assertInvalid(() => parse(kubeconfig({ 'insecure-skip-tls-verify': 'yes' })), /not true or false/);
    assertInvalid(() => parseKubeconfig('clusters: [\n', PATH, DIR), /cannot load the kubeconfig/);
    assertInvalid(() => parseKubeconfig('- a list', PATH, DIR), /at its top level, not a mapping/);
  });

  it('answers any text with a selection or an INVALID_CONFIG naming the file (fuzzed)', () => {
    const valid = kubeconfig();
    const anyValue = fc.oneof(fc.jsonValue(), fc.constant(undefined));
    // A valid kubeconfig with one value anywhere in it replaced by anything.
    const mutated = fc
      .tuple(fc.array(fc.oneof(fc.string(), fc.nat(3)), { minLength: 1, maxLength: 5 }), anyValue)
      .map(([path, value]) => replaceAt(structuredClone(valid), path, value));
    const text = fc.oneof(
      mutated.map((document) => JSON.stringify(document) ?? ''),
      fc.jsonValue().map((value) => JSON.stringify(value)),
      fc.string(),
      fc.string({ unit: fc.constantFrom(':', '-', ' ', '\n', '[', '{', '"', 'a', '!', '&', '*', '|') }),
    );
    fc.assert(
      fc.property(text, (input) => {
        try {
          const selection = parseKubeconfig(input, PATH, DIR);
          assert.equal(typeof selection.cluster.server, 'string');
          assert.ok(['http:', 'https:'].includes(new URL(selection.cluster.server).protocol));
        } catch (error) {
          assert.ok(isWarrenError(error, 'INVALID_CONFIG'), `not INVALID_CONFIG: ${String(error)}`);
          assert.ok(error.message.includes(PATH), error.message);
        }
      }),
      { numRuns: 2_000 },
    );
  });
});

/** `document` with the value at `path` (keys, or indexes into lists) set to `value`, where the path leads. */
function replaceAt(document: Record<string, unknown>, path: readonly (string | number)[], value: unknown): unknown {
  let at: unknown = document;
  for (const [i, step] of path.entries()) {
    if (typeof at !== 'object' || at === null) return document;
    const holder = at as Record<string | number, unknown>;
    const keys = Object.keys(holder);
    const key = typeof step === 'number' && keys.length > 0 ? (keys[step % keys.length] as string) : String(step);
    if (i === path.length - 1) holder[key] = value;
    else at = holder[key];
  }
  return document;
}

describe('KubeCredentials', () => {
  it('sends the token file as it is now, read again once a minute (a rotated token is picked up)', async () => {
    const dir = tempDir();
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'first\n');
    let now = 0;
    const credentials = new KubeCredentials(
      parseKubeconfig(
        JSON.stringify(kubeconfig({}, { token: undefined, tokenFile: 'token' })),
        join(dir, 'kubeconfig'),
        dir,
      ),
      { now: () => now },
    );
    assert.equal((await applied(credentials)).headers.Authorization, 'Bearer first');
    writeFileSync(tokenFile, 'second\n');
    now += REREAD_MS - 1;
    assert.equal((await applied(credentials)).headers.Authorization, 'Bearer first', 'not read for every request');
    now += 1;
    assert.equal((await applied(credentials)).headers.Authorization, 'Bearer second');
  });

  it('reads the CA file when applied and again after a minute, naming a file it cannot read', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'ca.crt'), 'CA PEM');
    const selection = parseKubeconfig(
      JSON.stringify(
        kubeconfig(
          { 'certificate-authority': 'ca.crt', 'insecure-skip-tls-verify': true },
          { username: 'u', password: 'p', token: undefined },
        ),
      ),
      join(dir, 'kubeconfig'),
      dir,
    );
    let now = 0;
    const credentials = new KubeCredentials(selection, { now: () => now });
    const options = await applied(credentials);
    assert.equal(String(options.ca), 'CA PEM');
    writeFileSync(join(dir, 'ca.crt'), 'CA PEM, renewed');
    assert.equal(String((await applied(credentials)).ca), 'CA PEM', 'not read again for every request');
    now += REREAD_MS;
    assert.equal(String((await applied(credentials)).ca), 'CA PEM, renewed');
    assert.equal(options.rejectUnauthorized, false);
    assert.equal(options.headers.Authorization, `Basic ${Buffer.from('u:p').toString('base64')}`);
    const missing = parseKubeconfig(
      JSON.stringify(kubeconfig({ 'certificate-authority': 'gone.crt' })),
      join(dir, 'k'),
      dir,
    );
    await assert.rejects(applied(new KubeCredentials(missing)), /certificate-authority .*gone\.crt/);
  });
});

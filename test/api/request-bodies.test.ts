/**
 * Every request body the agent reads refuses a field it does not know, in process (the real
 * server on a temp socket over `:memory:` SQLite and the manual clock): a misspelt field is never
 * ignored, so a request never does more, or other, than its caller meant. The operator routes
 * answer 400 BAD_REQUEST naming every unknown field (with a hint when one looks like a known field
 * mistyped) and do nothing; a CNI call answers it as a CNI error outcome the plugin can print.
 * None of these refusals is logged as a failure.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { requestJson } from '../../src/core/unix-http.ts';
import type { CniOutcome } from '../../src/api/protocol.ts';
import { type Harness, harness } from './harness.ts';

const config = { cniVersion: '1.1.0', name: 'bodynet', ipam: { type: 'warren', range: '10.79.0.0/24' } };
const add = (containerID: string) => ({
  command: 'ADD',
  containerID,
  netns: `/var/run/netns/${containerID}`,
  ifname: 'eth0',
  args: '',
  config,
});

describe('unknown fields of request bodies, in process', () => {
  let h: Harness;
  before(async () => {
    h = await harness();
  });
  after(async () => {
    await h.close();
  });

  const post = (path: string, body: unknown) => requestJson({ socket: h.socket, method: 'POST', path, body });
  const refusal = (message: string) => ({ status: 400, body: { error: { code: 'BAD_REQUEST', message } } });

  const refused: Array<[route: string, path: string, body: Record<string, unknown>, message: string]> = [
    ['release', '/v1/release', { address: '10.79.0.5', colour: 'red' }, 'release: unknown field "colour"'],
    [
      'release',
      '/v1/release',
      { containerID: 'body-1', scope: 'all', colour: 'red' },
      'release: unknown fields "scope", "colour"',
    ],
    ['release', '/v1/release', { adress: '10.79.0.5' }, 'release: unknown field "adress" (did you mean "address"?)'],
    ['audit', '/v1/audit', { fix: true, dryRun: true }, 'audit: unknown field "dryRun"'],
    ['audit', '/v1/audit', { Fix: true }, 'audit: unknown field "Fix" (did you mean "fix"?)'],
    ['forget', '/v1/nodes/forget', { node: 'n9', force: true }, 'forget: unknown field "force"'],
  ];
  for (const [route, path, body, message] of refused) {
    it(`POST ${path} refuses ${JSON.stringify(body)} with 400 BAD_REQUEST naming the field, and does nothing`, async () => {
      const held = await h.client.cni(add(`body-${route}`));
      assert.equal(held.kind, 'result');
      const before = await h.client.allocations();
      assert.deepEqual(await post(path, body), refusal(message));
      assert.deepEqual(await h.client.allocations(), before, 'nothing released');
    });
  }

  it('still takes every known field: the refusal is of the unknown ones only', async () => {
    assert.equal((await post('/v1/audit', { fix: false })).status, 200);
    const address = (
      ((await h.client.cni(add('body-known'))) as Extract<CniOutcome, { kind: 'result' }>).output.ips as Array<{
        address: string;
      }>
    )[0]?.address.split('/')[0];
    const released = await post('/v1/release', { address, pool: '10.79.0.0/24' });
    assert.equal(released.status, 200);
    assert.deepEqual(
      (released.body as { released: Array<{ containerID: string }> }).released.map((a) => a.containerID),
      ['body-known'],
    );
  });

  it('answers a CNI call with an unknown field as a CNI error outcome (code 7, HTTP 200) and allocates nothing', async () => {
    const answer = await post('/v1/cni', { ...add('body-cni'), cniVersion: '1.1.0' });
    assert.equal(answer.status, 200);
    const outcome = answer.body as CniOutcome;
    assert.equal(outcome.kind, 'error');
    assert.deepEqual(outcome.kind === 'error' ? [outcome.output.code, outcome.output.msg] : [], [
      7,
      'request: unknown field "cniVersion"',
    ]);
    assert.deepEqual(await h.client.allocations({ containerID: 'body-cni' }), []);
  });

  it('logs none of these refusals as failures', () => {
    assert.deepEqual(h.failures, []);
  });
});

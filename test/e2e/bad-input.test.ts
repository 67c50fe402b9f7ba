/**
 * Bad input through the real plugin executable and the agent's API: each gets the right CNI code
 * and a message naming the problem, and none of it changes the store.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { requestJson } from '../../src/core/unix-http.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { type CniCall, warren } from '../helpers/cni.ts';

describe('bad input', () => {
  let agent: AgentHandle;
  before(async () => {
    agent = await startAgent();
  });
  after(async () => {
    await agent.stop();
  });

  const good = () => ({
    cniVersion: '1.0.0',
    name: 'badnet',
    ipam: { type: 'warren', socket: agent.socket, range: '10.216.0.0/24' },
  });
  const withIpam = (ipam: Record<string, unknown>) => ({
    ...good(),
    ipam: { type: 'warren', socket: agent.socket, ...ipam },
  });
  const add = (config: unknown, extra: Partial<CniCall> = {}): CniCall => ({
    command: 'ADD',
    containerID: 'bad-1',
    netns: '/var/run/netns/bad',
    ifname: 'eth0',
    config,
    ...extra,
  });

  const cases: Array<[string, () => CniCall, number, RegExp]> = [
    ['malformed JSON', () => add('{"cniVersion": "1.0.0", '), 6, /not valid JSON/],
    ['a JSON array instead of an object', () => add('[1,2]'), 7, /must be a JSON object/],
    [
      'an unsupported cniVersion',
      () => add({ ...good(), cniVersion: '0.2.0' }),
      1,
      /cniVersion "0.2.0" is not supported/,
    ],
    ['a network name of the wrong type', () => add({ ...good(), name: 42 }), 7, /name:/],
    ['ipam of the wrong type', () => add({ ...good(), ipam: 'warren' }), 7, /ipam: must be an object/],
    ['range of the wrong type', () => add(withIpam({ range: 24 })), 7, /ipam\.range: must be a string/],
    [
      'an unknown ipam key',
      () => add(withIpam({ range: '10.216.0.0/24', rnage_start: '10.216.0.5' })),
      7,
      /ipam\.rnage_start: unknown key/,
    ],
    [
      'an unknown key in ipRanges',
      () => add(withIpam({ ipRanges: [{ range: '10.216.0.0/24', gw: '10.216.0.1' }] })),
      7,
      /ipam\.ipRanges\[0\]\.gw: unknown key/,
    ],
    [
      'ranges that overlap',
      () => add(withIpam({ range: '10.216.0.0/24', ipRanges: [{ range: '10.216.0.0/25' }] })),
      7,
      /ipam\.ipRanges\[0\]\.range: 10\.216\.0\.0\/25 overlaps 10\.216\.0\.0\/24 at ipam\.range/,
    ],
    [
      'a network_name with "#" in it',
      () => add(withIpam({ range: '10.216.0.0/24', network_name: 'blue#1' })),
      7,
      /ipam\.network_name: "blue#1" must not contain "#"/,
    ],
    [
      'range_start outside the range',
      () => add(withIpam({ range: '10.216.0.0/24', range_start: '10.217.0.5' })),
      7,
      /ipam\.range_start: 10\.217\.0\.5 is outside range/,
    ],
    [
      'an exclusion of the wrong family',
      () => add(withIpam({ range: '10.216.0.0/24', exclude: ['fd00::/64'] })),
      7,
      /ipam\.exclude\[0\]/,
    ],
    [
      'a negative cooldown',
      () => add(withIpam({ range: '10.216.0.0/24', cooldown_seconds: -1 })),
      7,
      /cooldown_seconds/,
    ],
    ['a missing CNI_COMMAND', () => add(good(), { env: { CNI_COMMAND: undefined } }), 4, /CNI_COMMAND is not set/],
    ['an unknown CNI_COMMAND', () => add(good(), { command: 'SMASH' }), 4, /CNI_COMMAND "SMASH"/],
    [
      'a missing CNI_CONTAINERID',
      () => add(good(), { env: { CNI_CONTAINERID: undefined } }),
      4,
      /CNI_CONTAINERID is not set/,
    ],
    ['a container ID with a path in it', () => add(good(), { containerID: '../../etc/passwd' }), 4, /CNI_CONTAINERID/],
    ['a missing CNI_IFNAME', () => add(good(), { env: { CNI_IFNAME: undefined } }), 4, /CNI_IFNAME is not set/],
    ['a missing CNI_NETNS on ADD', () => add(good(), { env: { CNI_NETNS: undefined } }), 4, /CNI_NETNS is not set/],
    ['an unknown CNI_ARGS key', () => add(good(), { args: 'FOO=bar' }), 4, /unknown argument "FOO"/],
    [
      'a requested IP that is not an address',
      () => add(good(), { args: 'IgnoreUnknown=1;IP=10.216.0.300' }),
      4,
      /IP "10\.216\.0\.300"/,
    ],
    [
      'a requested IP outside every range',
      () => add(good(), { args: 'IP=192.0.2.9' }),
      101,
      /none of the configured ranges/,
    ],
    [
      'CHECK with a config version older than CHECK',
      () => add({ ...good(), cniVersion: '0.3.1' }, { command: 'CHECK' }),
      1,
      /CHECK needs cniVersion 0\.4\.0/,
    ],
    [
      'a config nested 100000 levels deep (not a stack overflow)',
      () => add(`${JSON.stringify(good()).slice(0, -1)},"x":${'['.repeat(100_000)}${']'.repeat(100_000)}}`),
      7,
      /more than \d+ levels deep/,
    ],
  ];

  for (const [what, call, code, message] of cases) {
    it(`answers ${what} with code ${code} and a message naming it`, async () => {
      const reply = await warren(call());
      assert.equal(reply.code, 1, reply.stdout);
      assert.equal(reply.json?.code, code, reply.stdout);
      assert.match(String(reply.json?.msg), message);
      assert.equal(typeof reply.json?.cniVersion, 'string');
    });
  }

  it('answers an error in the version the config asked for', async () => {
    const reply = await warren(add({ ...withIpam({ range: '10.216.0.0/33' }), cniVersion: '0.3.1' }));
    assert.equal(reply.json?.cniVersion, '0.3.1');
  });

  it('changed nothing in the store for any of them', async () => {
    assert.deepEqual(await agent.allocations(), []);
    const pools = await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/pools' });
    assert.deepEqual(pools.body, []);
  });

  it('refuses malformed API requests with a 4xx and keeps serving', async () => {
    const raw = (path: string, method: 'GET' | 'POST', body?: unknown) =>
      requestJson({ socket: agent.socket, method, path, ...(body === undefined ? {} : { body }) });
    assert.equal((await raw('/v1/nothing', 'GET')).status, 404);
    assert.equal((await raw('/v1/cni', 'GET')).status, 405);
    assert.equal((await raw('/v1/allocations?colour=red', 'GET')).status, 400);
    assert.equal((await raw('/v1/release', 'POST', { address: 'not-an-ip' })).status, 400);
    assert.equal((await raw('/v1/release', 'POST', { pool: 5 })).status, 400);
    const cni = await raw('/v1/cni', 'POST', { command: 'ADD', containerID: 5, config: good() });
    assert.equal(cni.status, 200);
    assert.equal((cni.body as { output: { code: number } }).output.code, 7);
    const status = await raw('/v1/status', 'GET');
    assert.equal(status.status, 200);
    assert.deepEqual(await agent.allocations(), []);
  });
});

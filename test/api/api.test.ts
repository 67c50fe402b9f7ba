/**
 * The agent's API in process, no spawned processes: the real HTTP server on a unix socket in a
 * temp dir, over an in-memory SQLite store and a manual clock, called through the typed client.
 * Every route, its refusals with their codes and statuses, what is logged as a failure and what is
 * not, and the CNI outcomes the plugin prints.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { WarrenError, isWarrenError } from '../../src/core/errors.ts';
import { MAX_REQUEST_BYTES } from '../../src/api/limits.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { ApiClient } from '../../src/api/client.ts';
import type { CniOutcome, CniRequest } from '../../src/api/protocol.ts';
import { ROUTES } from '../../src/api/routes.ts';
import { tempDir } from '../helpers/processes.ts';
import { type Harness, harness } from './harness.ts';

/** The WarrenError a call is refused with. */
async function refusal(call: Promise<unknown>): Promise<WarrenError> {
  try {
    await call;
  } catch (error) {
    if (error instanceof WarrenError) return error;
    throw error;
  }
  assert.fail('expected the agent to refuse');
}

/** A raw request, for what the typed client would never send. */
async function raw(
  socket: string,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<{ status: number; body: unknown }> {
  return requestJson({ socket, method, path, ...(body === undefined ? {} : { body }) });
}

const config = (extra: Record<string, unknown> = {}, ipam: Record<string, unknown> = {}) => ({
  cniVersion: '1.1.0',
  name: 'apinet',
  ipam: { type: 'warren', range: '10.77.0.0/24', ...ipam },
  ...extra,
});

const call = (command: string, containerID = 'api-1', extra: Partial<CniRequest> = {}): CniRequest => ({
  command,
  containerID,
  netns: `/var/run/netns/${containerID}`,
  ifname: 'eth0',
  args: `K8S_POD_NAMESPACE=team;K8S_POD_NAME=${containerID}-pod`,
  config: config(),
  ...extra,
});

function errorCode(outcome: CniOutcome): number | undefined {
  return outcome.kind === 'error' ? outcome.output.code : undefined;
}

function addressOf(outcome: CniOutcome): string {
  assert.equal(outcome.kind, 'result', JSON.stringify(outcome));
  const ips = (outcome.kind === 'result' ? outcome.output.ips : []) as Array<{ address: string }>;
  return (ips[0]?.address ?? '').split('/')[0] as string;
}

describe('agent API in process', () => {
  let h: Harness;
  before(async () => {
    h = await harness();
  });
  after(async () => {
    await h.close();
  });

  describe('POST /v1/cni', () => {
    it('ADD returns an address in the config version, the same one when retried', async () => {
      const first = await h.client.cni(call('ADD'));
      const address = addressOf(first);
      assert.match(address, /^10\.77\.0\.\d+$/);
      assert.equal(first.kind === 'result' ? first.output.cniVersion : undefined, '1.1.0');
      assert.equal(addressOf(await h.client.cni(call('ADD'))), address, 'ADD is idempotent per attachment');
      const [held] = await h.client.allocations({ containerID: 'api-1' });
      assert.deepEqual(
        [held?.address, held?.podNamespace, held?.podName, held?.netns],
        [address, 'team', 'api-1-pod', '/var/run/netns/api-1'],
      );
    });

    it('CHECK is silent for what is held, 102 for an attachment holding nothing, 103 when prevResult disagrees', async () => {
      const address = addressOf(await h.client.cni(call('ADD', 'api-check')));
      const prev = (ip: string) => ({ cniVersion: '1.1.0', ips: [{ address: `${ip}/24` }] });
      assert.deepEqual(
        await h.client.cni(call('CHECK', 'api-check', { config: config({ prevResult: prev(address) }) })),
        { kind: 'silent' },
      );
      assert.equal(errorCode(await h.client.cni(call('CHECK', 'api-nobody'))), 102);
      const other = address === '10.77.0.200' ? '10.77.0.201' : '10.77.0.200';
      const mismatch = await h.client.cni(call('CHECK', 'api-check', { config: config({ prevResult: prev(other) }) }));
      assert.equal(errorCode(mismatch), 103);
      assert.match(
        mismatch.kind === 'error' ? mismatch.output.msg : '',
        new RegExp(`holds ${address.replace(/\./g, '\\.')} .* prevResult says ${other.replace(/\./g, '\\.')}`),
      );
    });

    it('DEL releases and is idempotent', async () => {
      await h.client.cni(call('ADD', 'api-del'));
      assert.deepEqual(await h.client.cni(call('DEL', 'api-del', { netns: '' })), { kind: 'silent' });
      assert.deepEqual(await h.client.allocations({ containerID: 'api-del' }), []);
      assert.deepEqual(await h.client.cni(call('DEL', 'api-del')), { kind: 'silent' });
    });

    it('GC spares what is younger than the grace and releases the rest not on the valid list', async () => {
      const gcnet = (valid: Array<{ containerID: string; ifname: string }>) =>
        config({ name: 'gcnet', 'cni.dev/valid-attachments': valid }, { range: '10.78.0.0/24' });
      for (const id of ['gc-keep', 'gc-drop']) addressOf(await h.client.cni(call('ADD', id, { config: gcnet([]) })));
      const gc = () => h.client.cni({ command: 'GC', config: gcnet([{ containerID: 'gc-keep', ifname: 'eth0' }]) });
      assert.deepEqual(await gc(), { kind: 'silent' });
      assert.equal((await h.client.allocations({ network: 'gcnet' })).length, 2, 'both younger than the grace');
      h.clock.advance(60_001);
      assert.deepEqual(await gc(), { kind: 'silent' });
      assert.deepEqual(
        (await h.client.allocations({ network: 'gcnet' })).map((a) => a.containerID),
        ['gc-keep'],
      );
    });

    it('STATUS is silent while the store answers and 50 while it does not; VERSION lists the versions', async () => {
      assert.deepEqual(await h.client.cni({ command: 'STATUS', config: config() }), { kind: 'silent' });
      h.store.pingFault = new Error('database is locked');
      try {
        const status = await h.client.cni({ command: 'STATUS', config: config() });
        assert.equal(errorCode(status), 50);
        assert.match(status.kind === 'error' ? status.output.msg : '', /is not usable: database is locked/);
      } finally {
        h.store.pingFault = undefined;
      }
      const version = await h.client.cni({ command: 'VERSION', config: {} });
      assert.equal(version.kind, 'result');
      assert.ok(((version.kind === 'result' ? version.output.supportedVersions : []) as string[]).includes('1.1.0'));
    });

    const refused: Array<[string, unknown, number, RegExp]> = [
      ['a request that is not an object', [1, 2], 7, /request must be a JSON object/],
      [
        'a field of the wrong type',
        { command: 'ADD', containerID: 5, config: config() },
        7,
        /request field containerID must be a string/,
      ],
      ['no command', { config: config() }, 7, /request field command must be a string/],
      ['an unknown command', { ...call('SMASH') }, 4, /CNI_COMMAND "SMASH" is not one of/],
      ['a container ID with a path in it', { ...call('ADD', '../../etc/passwd') }, 4, /CNI_CONTAINERID/],
      ['no ifname', { ...call('ADD'), ifname: undefined }, 4, /CNI_IFNAME is not set/],
      ['ADD without a netns', { ...call('ADD'), netns: '' }, 4, /CNI_NETNS is not set/],
      ['an unknown CNI_ARGS key', { ...call('ADD'), args: 'FOO=bar' }, 4, /unknown argument "FOO"/],
      ['a bad config', { ...call('ADD'), config: config({}, { range: 24 }) }, 7, /ipam\.range: must be a string/],
      [
        'a config asking for another store',
        { ...call('ADD'), config: config({}, { store: 'etcd' }) },
        7,
        /asks for the etcd store/,
      ],
      [
        'a requested IP outside the range',
        { ...call('ADD'), args: 'IP=192.0.2.1' },
        101,
        /none of the configured ranges/,
      ],
    ];
    for (const [what, request, code, message] of refused) {
      it(`answers ${what} with CNI code ${code} as an outcome (HTTP 200), not as a failure`, async () => {
        const answer = await raw(h.socket, 'POST', '/v1/cni', request);
        assert.equal(answer.status, 200);
        const outcome = answer.body as CniOutcome;
        assert.equal(errorCode(outcome), code, JSON.stringify(outcome));
        assert.match(outcome.kind === 'error' ? outcome.output.msg : '', message);
      });
    }

    it('answers an error in the version the config asked for', async () => {
      const outcome = await h.client.cni(
        call('ADD', 'api-v', { config: { ...config({}, { range: '10.77.0.0/33' }), cniVersion: '0.3.1' } }),
      );
      assert.equal(outcome.kind === 'error' ? outcome.output.cniVersion : undefined, '0.3.1');
    });

    it('reports an unexpected failure of a call (a store fault) and no refusal of bad input', async () => {
      const before = h.failures.length;
      await raw(h.socket, 'POST', '/v1/cni', { command: 'ADD', containerID: 5, config: config() });
      assert.equal(h.failures.length, before, 'bad input is the caller’s business');
      h.store.listFault = new Error('disk on fire');
      try {
        const outcome = await h.client.cni(call('CHECK'));
        assert.equal(errorCode(outcome), 5);
      } finally {
        h.store.listFault = undefined;
      }
      assert.deepEqual(h.failures.slice(before), ['cni CHECK: disk on fire']);
      h.failures.length = before;
    });
  });

  describe('queries', () => {
    it('GET /v1/status: the node, the store, readiness, counts and the journal', async () => {
      const s = await h.client.status();
      assert.equal(s.node, 'n1');
      assert.equal(s.version, '0.0.0-test');
      assert.equal(s.socket, h.socket);
      assert.equal(s.ready, true);
      assert.equal(s.store.healthy, true);
      assert.equal(s.allocations, (await h.client.allocations()).length);
      assert.equal(s.reconciler.journalDir, h.journalDir);
      assert.equal(s.cluster, undefined);
      h.store.pingFault = new Error('database is locked');
      try {
        const down = await h.client.status();
        assert.deepEqual([down.ready, down.store.healthy, down.store.error], [false, false, 'database is locked']);
      } finally {
        h.store.pingFault = undefined;
      }
    });

    it('GET /v1/pools: utilisation per pool', async () => {
      const pool = (await h.client.pools()).find((p) => p.pool === '10.77.0.0/24');
      assert.ok(pool !== undefined);
      assert.equal(pool.capacity, '254');
      assert.equal(pool.allocated, (await h.client.allocations({ pool: '10.77.0.0/24' })).length);
      assert.equal(pool.utilisation, pool.allocated / 254);
    });

    it('GET /v1/allocations: every filter, a canonicalised address, and a refused unknown filter or address', async () => {
      const all = await h.client.allocations();
      assert.ok(all.length >= 2);
      const one = all[0] as Allocation;
      assert.deepEqual(
        await h.client.allocations({
          containerID: one.containerID,
          ifname: 'eth0',
          network: one.network,
          node: 'n1',
          pool: one.pool,
        }),
        [one],
      );
      assert.deepEqual(await h.client.allocations({ podNamespace: 'team', podName: `${one.containerID}-pod` }), [one]);
      // An address is matched in its canonical form, however it is written.
      const v6 = addressOf(
        await h.client.cni(call('ADD', 'api-v6', { config: config({ name: 'v6net' }, { range: 'fd00:77::/120' }) })),
      );
      const spelled = v6.toUpperCase().replace('FD00:77::', 'FD00:0077:0:0:0:0:0:');
      assert.notEqual(spelled, v6);
      assert.deepEqual(
        (await h.client.allocations({ address: spelled })).map((a) => a.address),
        [v6],
      );
      assert.deepEqual(await h.client.allocations({ podUID: 'nobody' }), []);
      const unknown = await raw(h.socket, 'GET', '/v1/allocations?colour=red');
      assert.equal(unknown.status, 400);
      assert.deepEqual(unknown.body, {
        error: {
          code: 'BAD_REQUEST',
          message:
            'unknown filter "colour"; filters are pool, network, containerID, ifname, podNamespace, podName, podUID, node, address',
        },
      });
      const bad = await refusal(h.client.allocations({ address: 'not-an-ip' }));
      assert.deepEqual([bad.code, bad.message], ['BAD_REQUEST', 'address "not-an-ip" is not an IP address']);
    });

    it('GET /v1/journal: the journal and the last pass', async () => {
      const j = await h.client.journal();
      assert.equal(j.journalDir, h.journalDir);
      assert.deepEqual(j.pending, []);
      assert.equal(typeof j.releasedFromJournal, 'number');
    });

    it('GET /v1/audit judges, POST /v1/audit {fix} also releases (nothing stale here), and a bad body is 400', async () => {
      const report = await h.client.audit();
      assert.equal(report.findings.length, (await h.client.allocations()).length);
      assert.equal(report.counts.stale, 0);
      assert.equal(report.released, undefined);
      const fixed = await h.client.audit({ fix: true });
      assert.deepEqual([fixed.released, fixed.errors], [[], []]);
      const bad = await raw(h.socket, 'POST', '/v1/audit', { fix: 'yes' });
      assert.deepEqual(
        [bad.status, bad.body],
        [400, { error: { code: 'BAD_REQUEST', message: 'audit needs {"fix": true|false}' } }],
      );
    });

    it('GET /v1/plugins is refused (400) when the plugin registry is off, and the status counts no plugins', async () => {
      const plugins = await refusal(h.client.plugins());
      assert.deepEqual(
        [plugins.code, plugins.message],
        ['BAD_REQUEST', 'the plugin registry is off (--plugins-dir is empty)'],
      );
      assert.equal((await h.client.status()).plugins, undefined);
    });

    it('POST /v1/store/accept is refused on SQLite (400), as is a body with any field', async () => {
      const accept = await refusal(h.client.acceptStore());
      assert.equal(accept.code, 'BAD_REQUEST');
      assert.match(accept.message, /is not shared by nodes; there is nothing to accept/);
      const answer = await raw(h.socket, 'POST', '/v1/store/accept', { force: true });
      assert.equal(answer.status, 400);
      assert.match((answer.body as { error: { message: string } }).error.message, /force/);
    });

    it('GET /v1/nodes and POST /v1/nodes/forget are refused on SQLite (400), as is a forget without a node', async () => {
      const nodes = await refusal(h.client.nodes());
      assert.equal(nodes.code, 'BAD_REQUEST');
      assert.match(nodes.message, /is not shared by nodes; nodes exist with --store etcd/);
      const forget = await refusal(h.client.forgetNode({ node: 'n9' }));
      assert.equal(forget.code, 'BAD_REQUEST');
      assert.match(forget.message, /there is no node to forget/);
      for (const body of [{}, { node: '' }, { node: 7 }, null]) {
        const answer = await raw(h.socket, 'POST', '/v1/nodes/forget', body);
        assert.deepEqual(
          [answer.status, answer.body],
          [400, { error: { code: 'BAD_REQUEST', message: 'forget needs {"node": "<name>"}' } }],
          JSON.stringify(body),
        );
      }
    });
  });

  describe('POST /v1/release', () => {
    it('releases by address once; a second time is NOT_FOUND naming the address, and changes nothing', async () => {
      const address = addressOf(await h.client.cni(call('ADD', 'rel-a')));
      const released = await h.client.release({ address });
      assert.deepEqual(
        released.released.map((a) => [a.address, a.containerID]),
        [[address, 'rel-a']],
      );
      const count = (await h.client.allocations()).length;
      for (const request of [{ address }, { address, pool: '10.77.0.0/24' }, { address, force: true }]) {
        const again = await refusal(h.client.release(request));
        assert.equal(again.code, 'NOT_FOUND');
        assert.match(again.message, new RegExp(`no allocation holds ${address.replace(/\./g, '\\.')}`));
      }
      assert.equal((await h.client.allocations()).length, count);
    });

    it('releases everything a container holds, narrowed by network and ifname', async () => {
      addressOf(await h.client.cni(call('ADD', 'rel-c')));
      addressOf(await h.client.cni(call('ADD', 'rel-c', { ifname: 'net1' })));
      assert.deepEqual(await h.client.release({ containerID: 'rel-c', network: 'othernet' }), { released: [] });
      assert.deepEqual(
        (await h.client.release({ containerID: 'rel-c', ifname: 'net1' })).released.map((a) => a.ifname),
        ['net1'],
      );
      assert.deepEqual(
        (await h.client.release({ containerID: 'rel-c' })).released.map((a) => a.ifname),
        ['eth0'],
      );
      assert.deepEqual(await h.client.allocations({ containerID: 'rel-c' }), []);
    });

    const bad: Array<[string, unknown, RegExp]> = [
      ['not an object', [1], /release needs a JSON object/],
      ['an unknown field', { colour: 'red' }, /release: unknown field "colour"/],
      ['a field of the wrong type', { pool: 5 }, /release: pool must be a non-empty string/],
      ['an empty field', { containerID: '' }, /release: containerID must be a non-empty string/],
      ['neither form', {}, /release needs an address \(with an optional pool\) or a containerID/],
      ['a pool alone', { pool: '10.77.0.0/24' }, /release needs an address/],
      ['fields of both forms', { address: '10.77.0.9', containerID: 'x' }, /not fields of both/],
      ['an address that is not one', { address: 'not-an-ip' }, /release: address "not-an-ip" is not an IP address/],
      ['a force that is not a boolean', { address: '10.77.0.9', force: 'yes' }, /release: force must be true or false/],
    ];
    for (const [what, body, message] of bad) {
      it(`refuses ${what} with 400 BAD_REQUEST and releases nothing`, async () => {
        const count = (await h.client.allocations()).length;
        const answer = await raw(h.socket, 'POST', '/v1/release', body);
        assert.equal(answer.status, 400);
        const error = (answer.body as { error: { code: string; message: string } }).error;
        assert.equal(error.code, 'BAD_REQUEST');
        assert.match(error.message, message);
        assert.equal((await h.client.allocations()).length, count);
      });
    }
  });

  describe('HTTP', () => {
    it('serves every route of the table, and nothing else', () => {
      assert.deepEqual(
        ROUTES.map((r) => `${r.method} ${r.path}`),
        [
          'POST /v1/cni',
          'GET /v1/status',
          'GET /v1/pools',
          'GET /v1/allocations',
          'POST /v1/release',
          'GET /v1/audit',
          'POST /v1/audit',
          'GET /v1/journal',
          'GET /v1/nodes',
          'GET /v1/reservations',
          'POST /v1/nodes/forget',
          'POST /v1/store/accept',
          'GET /v1/plugins',
          'GET /v1/doctor',
          'POST /v1/uninstall',
        ],
      );
    });

    it('answers an unknown route 404 NOT_FOUND and a known path with the wrong method 405 METHOD_NOT_ALLOWED', async () => {
      assert.deepEqual(await raw(h.socket, 'GET', '/v1/nothing'), {
        status: 404,
        body: { error: { code: 'NOT_FOUND', message: 'no route GET /v1/nothing' } },
      });
      assert.deepEqual(await raw(h.socket, 'GET', '/v1/cni'), {
        status: 405,
        body: { error: { code: 'METHOD_NOT_ALLOWED', message: '/v1/cni takes POST, not GET' } },
      });
      assert.deepEqual(await raw(h.socket, 'POST', '/v1/status', {}), {
        status: 405,
        body: { error: { code: 'METHOD_NOT_ALLOWED', message: '/v1/status takes GET, not POST' } },
      });
    });

    it('refuses a body past the limit with 413 TOO_LARGE, and keeps serving', async () => {
      const text = JSON.stringify({ command: 'ADD', config: { pad: 'x'.repeat(MAX_REQUEST_BYTES) } });
      const answer = await requestJson({ socket: h.socket, method: 'POST', path: '/v1/cni', bodyText: text });
      assert.deepEqual(answer, {
        status: 413,
        body: { error: { code: 'TOO_LARGE', message: `request body is larger than ${MAX_REQUEST_BYTES} bytes` } },
      });
      assert.equal((await h.client.status()).ready, true);
    });

    it('refuses a body that is not JSON with 400 BAD_REQUEST', async () => {
      const answer = await requestJson({
        socket: h.socket,
        method: 'POST',
        path: '/v1/release',
        bodyText: '{"address": ',
      });
      assert.equal(answer.status, 400);
      const error = (answer.body as { error: { code: string; message: string } }).error;
      assert.equal(error.code, 'BAD_REQUEST');
      assert.match(error.message, /^request body is not valid JSON: /);
    });

    it('logs none of the refusals above as failures', () => {
      assert.deepEqual(h.failures, []);
    });

    it('answers an unexpected failure 500 with its code and logs it; a "try again" is 503 and not logged', async () => {
      h.store.listFault = new Error('disk on fire');
      try {
        assert.deepEqual(await raw(h.socket, 'GET', '/v1/allocations'), {
          status: 500,
          body: { error: { code: 'INTERNAL', message: 'disk on fire' } },
        });
        assert.deepEqual(h.failures, ['GET /v1/allocations: disk on fire']);
        h.store.listFault = new WarrenError('TRY_AGAIN', 'store busy');
        const busy = await refusal(h.client.allocations());
        assert.deepEqual([busy.code, busy.message], ['TRY_AGAIN', 'store busy']);
        assert.equal((await raw(h.socket, 'GET', '/v1/allocations')).status, 503);
        assert.equal(h.failures.length, 1);
      } finally {
        h.store.listFault = undefined;
        h.failures.length = 0;
      }
    });
  });

  it('a client of an agent that is not there fails AGENT_UNREACHABLE, not with a code the agent never sent', async () => {
    const error = await refusal(new ApiClient({ socket: join(tempDir(), 'gone.sock') }).status());
    assert.ok(isWarrenError(error, 'AGENT_UNREACHABLE'));
    assert.match(error.message, /is not reachable \(ENOENT\)/);
  });
});

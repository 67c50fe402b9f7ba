/**
 * An agent on etcd never takes a store that lost its data for a fresh one, and never shares its node
 * name with another agent: real etcd, real agent processes, the real plugin executable and CLI.
 * - etcd killed, its data directory wiped, started again with the same name and URLs while an
 *   agent holds allocations: the agent stops allocating (ADD 11, STATUS 50, status and doctor
 *   say why) and hands out none of the addresses its containers hold, until an operator accepts;
 * - a second agent with the same --node-name on the same etcd is refused at start, naming the
 *   first; an agent whose announcement another instance took stops allocating and says so;
 *   An agent started again on an etcd wiped while it was stopped knows it from its state directory;
 *   an ordinary lease expiry is none of this: the agent announces itself again;
 * - an agent killed with -9 starts again on its state directory at once, though its old lease lives;
 *   its previous start on another boot is waited out (a reboot), and refused while renewed (a clone).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Etcd3 } from 'etcd3';
import { requestJson } from '../../src/core/unix-http.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { type EtcdCluster, startEtcd } from '../helpers/etcd.ts';
import { HANG_BOUND_MS, CHILD_PATH, WARREN_BIN, run, tempDir, track, waitFor } from '../helpers/processes.ts';

function nodeArgs(name: string, etcd: EtcdCluster, prefix: string, extra: readonly string[] = []): string[] {
  return [
    '--node-name',
    name,
    '--store',
    'etcd',
    '--etcd-endpoints',
    etcd.endpoints.join(','),
    '--etcd-prefix',
    prefix,
    '--reconcile-interval',
    '1',
    '--upkeep-interval',
    '1',
    ...extra,
  ];
}

function cli(agent: AgentHandle, ...args: string[]) {
  return run(process.execPath, [WARREN_BIN, ...args, '--socket', agent.socket], {
    env: { ...process.env, PATH: CHILD_PATH },
  });
}

function network(agent: Pick<AgentHandle, 'socket' | 'dir'>, name: string, range: string) {
  const config = {
    cniVersion: '1.1.0',
    name,
    ipam: { type: 'warren', socket: agent.socket, journal_dir: join(agent.dir, 'journal'), range },
  };
  return {
    config,
    call: (command: string, id: string) =>
      warren({ command, containerID: id, netns: `/var/run/netns/${id}`, ifname: 'eth0', config }),
  };
}

/** An agent process followed as it starts (startAgent returns only once it serves). */
function spawnAgent(dir: string, args: readonly string[]) {
  const socket = join(dir, 'warren.sock');
  const child = track(
    spawn(
      process.execPath,
      [
        WARREN_BIN,
        'agent',
        '--state-dir',
        dir,
        '--socket',
        socket,
        '--journal-dir',
        join(dir, 'journal'),
        '--netns-dirs',
        '',
        '--containerd',
        'off',
        ...args,
      ],
      {
        env: { ...process.env, PATH: CHILD_PATH },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    ),
  );
  let output = '';
  child.stdout?.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { dir, socket, child, exited, output: () => output };
}

describe('an etcd that lost its data is never taken for a fresh cluster', () => {
  let etcd: EtcdCluster;
  let agent: AgentHandle;
  /** Container → the address it was given before etcd lost its data. */
  const held = new Map<string, string>();
  /** Addresses the node's file holds when the store is accepted (an ADD served before the wipe was found counts). */
  let kept = 4;
  before(async () => {
    etcd = await startEtcd(1);
    agent = await startAgent({ args: nodeArgs('wiped-n1', etcd, '/store-safety-wipe/') });
  });
  after(async () => {
    await agent?.kill();
    await etcd?.stop();
  });

  it('an agent whose etcd was wiped and restarted refuses ADD (11) naming the cause, STATUS 50, says why in status and doctor, and never hands out an address it handed out', async () => {
    const net = network(agent, 'wiped', '10.241.7.0/24');
    for (const id of ['w1', 'w2', 'w3', 'w4']) {
      const reply = await net.call('ADD', id);
      assert.equal(reply.code, 0, reply.stdout);
      held.set(id, resultAddresses(reply)[0] as string);
    }
    const member = etcd.members[0];
    assert.ok(member);
    await etcd.wipe(member);

    // Two tiers: an ADD with room in this node's blocks asks etcd nothing, so the wipe is found by
    // the next check of the store (the upkeep's renewal, the store's ping), within --upkeep-interval;
    // an ADD served before that came from the node's own file, which knows what it handed out.
    const early = await net.call('ADD', 'after-0');
    if (early.code === 0) kept += 1;
    if (early.code === 0)
      for (const address of resultAddresses(early))
        assert.ok(![...held.values()].includes(address), `${address} handed out again before the wipe was found`);
    // New containers, and retries of the ones that hold addresses: none may get an address.
    const refused = async (id: string) => {
      const reply = await net.call('ADD', id);
      assert.notEqual(reply.code, 0, `ADD ${id} on a wiped store was served: ${reply.stdout}`);
      return reply;
    };
    // Still so after the upkeep has run a few times (it renews, and must not "fix" anything).
    await waitFor(
      'the agent to report why it stopped',
      async () => {
        const s = await cli(agent, 'status', '--json');
        return (JSON.parse(s.stdout) as { cluster?: { problem?: string } }).cluster?.problem !== undefined
          ? true
          : undefined;
      },
      30_000,
    );
    for (const id of ['after-1', 'after-2', 'after-3', ...held.keys()]) {
      const reply = await refused(id);
      assert.equal(reply.json?.code, 11, reply.stdout);
      assert.match(String(reply.json?.msg), /lost its data|went backwards/);
    }

    const status = await warren({ command: 'STATUS', config: net.config });
    assert.equal(status.json?.code, 50, status.stdout);
    assert.match(String(status.json?.msg), /lost its data|went backwards/);

    const human = await cli(agent, 'status');
    assert.equal(human.code, 1, 'status exits 1 while not ready');
    assert.match(human.stdout, /NOT ALLOCATING: .*(lost its data|went backwards).*warren store accept/);

    const doctor = await run(process.execPath, [WARREN_BIN, 'doctor', '--socket', agent.socket, '--json'], {
      env: { ...process.env, PATH: CHILD_PATH },
    });
    const findings = (
      JSON.parse(doctor.stdout) as { findings: Array<{ id: string; severity: string; detail?: string }> }
    ).findings;
    const stopped = findings.find((f) => f.id === 'store-not-allocating');
    assert.ok(stopped, `doctor reports the stop: ${doctor.stdout}`);
    assert.equal(stopped.severity, 'error');
    assert.match(String(stopped.detail), /lost its data|went backwards/);

    // The agent claimed and published nothing into the wiped store (two tiers: the claims and
    // publications are what it writes there; the addresses stay in its own file).
    const raw = new Etcd3({ hosts: etcd.endpoints });
    try {
      for (const under of ['blocks/', 'published/', 'ranges/'])
        assert.deepEqual(
          await raw.getAll().prefix(`/store-safety-wipe/${under}`).keys(),
          [],
          `nothing under ${under} in the wiped store`,
        );
    } finally {
      raw.close();
    }
  });

  it('after the operator accepts the store (warren store accept), the agent writes back what it held and allocates again, never those addresses', async () => {
    const accepted = await cli(agent, 'store', 'accept');
    assert.equal(accepted.code, 0, accepted.stdout + accepted.stderr);
    assert.match(
      accepted.stdout,
      /accepted the store as it is now; allocation had stopped for: .*(lost its data|went backwards)/,
    );
    // Two tiers: what is written back is the claims of the blocks the node's file holds (sized to the
    // range now, so more than one), with their addresses.
    assert.match(accepted.stdout, new RegExp(`wrote back ${kept} addresses and [1-9][0-9]* block claims`));
    const net = network(agent, 'wiped', '10.241.7.0/24');
    // Its containers keep their addresses: a retried ADD gets the same one back.
    for (const [id, address] of held) {
      const retried = await net.call('ADD', id);
      assert.equal(retried.code, 0, retried.stdout);
      assert.deepEqual(resultAddresses(retried), [address], `${id} keeps ${address}`);
    }
    const fresh: string[] = [];
    for (let i = 0; i < 20; i++) {
      const reply = await net.call('ADD', `fresh-${i}`);
      assert.equal(reply.code, 0, reply.stdout);
      fresh.push(...resultAddresses(reply));
    }
    for (const address of held.values())
      assert.ok(!fresh.includes(address), `${address}, held by a live container, handed out again`);
    assert.equal((await warren({ command: 'STATUS', config: net.config })).code, 0);
  });
});

describe('a store that lost its data while the agent was down', () => {
  let etcd: EtcdCluster;
  let agent: AgentHandle | undefined;
  before(async () => {
    etcd = await startEtcd(1);
  });
  after(async () => {
    await agent?.kill();
    await etcd?.stop();
  });

  it('an agent started again on an etcd wiped while it was stopped serves, but allocates nothing, naming the lost identity', async () => {
    const args = nodeArgs('down-n1', etcd, '/store-safety-down/');
    const first = await startAgent({ args });
    const net = network(first, 'down', '10.241.12.0/24');
    const held = resultAddresses(await net.call('ADD', 'd1'));
    assert.equal(held.length, 1);
    assert.equal(await first.stop(), 0);
    const member = etcd.members[0];
    assert.ok(member);
    await etcd.wipe(member);

    agent = await startAgent({ dir: first.dir, args });
    for (const id of ['d1', 'd2']) {
      const reply = await net.call('ADD', id);
      assert.equal(reply.json?.code, 11, reply.stdout);
      assert.match(
        String(reply.json?.msg),
        /lost its data: its identity record \/store-safety-down\/identity \([0-9a-f-]+\) is gone/,
      );
    }
    assert.equal((await warren({ command: 'STATUS', config: net.config })).json?.code, 50);
  });
});

describe('a restart on another boot (a reboot, or a clone of the state directory)', () => {
  let etcd: EtcdCluster;
  let raw: Etcd3;
  const agents: AgentHandle[] = [];
  before(async () => {
    etcd = await startEtcd(1);
    raw = new Etcd3({ hosts: etcd.endpoints });
  });
  after(async () => {
    for (const a of agents) await a.kill();
    raw?.close();
    await etcd?.stop();
  });

  /** A state directory whose last start was instance `previous`, and that instance's announcement, made on another boot. */
  const leftBehind = async (node: string, prefix: string, previous: string) => {
    const dir = tempDir('warren-reboot-');
    writeFileSync(join(dir, 'cluster.json'), JSON.stringify({ instance: previous }));
    const lease = raw.lease(2);
    await lease
      .put(`${prefix}nodes/${node}`)
      .value(
        JSON.stringify({ node, since: Date.now(), instance: previous, host: 'vm', pid: 99999, bootId: 'another-boot' }),
      );
    return { dir, lease };
  };

  it('an agent whose previous start announced on another boot waits for that lease to lapse, then starts', async () => {
    const { dir, lease } = await leftBehind('reboot-n1', '/store-safety-reboot/', 'prev-instance-1');
    // A lease far longer than the old one, so the agent waits as long as the old lease is renewed here.
    const agent = spawnAgent(dir, nodeArgs('reboot-n1', etcd, '/store-safety-reboot/', ['--node-lease', '30']));
    try {
      await waitFor(
        'the agent to say it waits',
        () =>
          /this agent's previous start on another boot .*waiting up to 32 s for its lease to lapse/.test(agent.output())
            ? true
            : undefined,
        HANG_BOUND_MS,
      );
      await lease.revoke(); // the old process is gone: its lease lapses
      await waitFor(
        'the agent to serve',
        async () => {
          if (agent.child.exitCode !== null) throw new Error(`agent exited: ${agent.output()}`);
          const r = await requestJson({
            socket: agent.socket,
            method: 'GET',
            path: '/v1/status',
            timeoutMs: 2_000,
          }).catch(() => undefined);
          return r?.status === 200 ? true : undefined;
        },
        60_000,
      );
      assert.equal((await network(agent, 'reboot', '10.241.13.0/24').call('ADD', 'r1')).code, 0);
    } finally {
      agent.child.kill('SIGKILL');
    }
  });

  it('an agent whose previous start on another boot is still renewed elsewhere (a clone) refuses to start, naming it', async () => {
    const { dir, lease } = await leftBehind('clone-n1', '/store-safety-clone/', 'prev-instance-2');
    try {
      const refused = await run(process.execPath, [
        WARREN_BIN,
        'agent',
        '--state-dir',
        dir,
        '--socket',
        join(dir, 'warren.sock'),
        '--journal-dir',
        join(dir, 'journal'),
        '--netns-dirs',
        '',
        '--containerd',
        'off',
        ...nodeArgs('clone-n1', etcd, '/store-safety-clone/', ['--node-lease', '2']),
      ]);
      assert.notEqual(refused.code, 0, refused.stdout + refused.stderr);
      assert.match(
        refused.stdout + refused.stderr,
        /node clone-n1 is already announced in etcd by agent instance prev-instance-2 \(host vm, pid 99999/,
      );
    } finally {
      await lease.revoke();
    }
  });
});

describe('an ordinary lease expiry is not a lost store', () => {
  let etcd: EtcdCluster;
  let agent: AgentHandle;
  before(async () => {
    etcd = await startEtcd(1);
    agent = await startAgent({ args: nodeArgs('lapsed-n1', etcd, '/store-safety-lapse/') });
  });
  after(async () => {
    await agent?.kill();
    await etcd?.stop();
  });

  it('an agent whose announcement lease expired announces itself again and keeps allocating', async () => {
    const net = network(agent, 'lapsed', '10.241.11.0/24');
    const first = await net.call('ADD', 'l1');
    assert.equal(first.code, 0, first.stdout);
    const raw = new Etcd3({ hosts: etcd.endpoints });
    try {
      const key = '/store-safety-lapse/nodes/lapsed-n1';
      const before = await raw.get(key).exec();
      const lease = before.kvs[0]?.lease;
      assert.ok(lease !== undefined && lease !== '0', 'the announcement lives on a lease');
      const instance = (JSON.parse(before.kvs[0]?.value.toString() ?? '{}') as { instance?: string }).instance;
      // What etcd does when a lease runs out: the lease and its keys go; everything else stays.
      await raw.leaseClient.leaseRevoke({ ID: lease });
      await waitFor(
        'the agent to announce itself again',
        async () => {
          const now = await raw.get(key).exec();
          return now.kvs[0] !== undefined && now.kvs[0].lease !== lease ? true : undefined;
        },
        30_000,
      );
      const again = JSON.parse((await raw.get(key).string()) ?? '{}') as { instance?: string };
      assert.equal(again.instance, instance, 'the same instance announced again');
    } finally {
      raw.close();
    }
    const second = await net.call('ADD', 'l2');
    assert.equal(second.code, 0, second.stdout);
    assert.deepEqual(resultAddresses(await net.call('ADD', 'l1')), resultAddresses(first));
    const status = JSON.parse((await cli(agent, 'status', '--json')).stdout) as {
      ready: boolean;
      cluster?: { problem?: string };
    };
    assert.equal(status.ready, true);
    assert.equal(status.cluster?.problem, undefined);
  });
});

describe('one agent per node name on one etcd', () => {
  let etcd: EtcdCluster;
  const agents: AgentHandle[] = [];
  before(async () => {
    etcd = await startEtcd(1);
  });
  after(async () => {
    for (const a of agents) await a.kill();
    await etcd?.stop();
  });

  it('a second agent with the node name of a live one refuses to start, naming the first, with a non-zero exit', async () => {
    const first = await startAgent({ args: nodeArgs('twin-node', etcd, '/store-safety-twins/') });
    agents.push(first);
    const net = network(first, 'twins', '10.241.9.0/24');
    assert.equal((await net.call('ADD', 't1')).code, 0);

    const second = spawnAgent(tempDir('warren-twin-'), nodeArgs('twin-node', etcd, '/store-safety-twins/'));
    // It either exits, or (the defect) serves: then it is stopped here and the test fails.
    const outcome = await waitFor(
      'the second agent to exit or serve',
      async () => {
        if (second.child.exitCode !== null) return 'exited';
        const r = await requestJson({
          socket: second.socket,
          method: 'GET',
          path: '/v1/status',
          timeoutMs: 2_000,
        }).catch(() => undefined);
        return r?.status === 200 ? 'serving' : undefined;
      },
      60_000,
    );
    if (outcome === 'serving') second.child.kill('SIGKILL');
    const code = await second.exited;
    const output = second.output();
    assert.equal(outcome, 'exited', `the second agent must not serve: ${output}`);
    assert.notEqual(code, 0, `the second agent exits non-zero: ${output}`);
    assert.match(
      output,
      /node twin-node is already announced in etcd by agent instance [0-9a-f-]+ \(host [^,]+, pid ([0-9]+), since /,
    );
    assert.equal(output.match(/pid ([0-9]+), since/)?.[1], String(first.pid), 'the first agent is named by its pid');

    // The first one goes on serving, and still holds what it held.
    assert.equal((await net.call('ADD', 't2')).code, 0);
    assert.equal((await first.allocations('?containerID=t1')).length, 1);
  });

  it('an agent whose announcement another instance took stops allocating and names it, rather than fight', async () => {
    const first = agents[0] as AgentHandle;
    const raw = new Etcd3({ hosts: etcd.endpoints });
    try {
      await raw
        .put('/store-safety-twins/nodes/twin-node')
        .value(
          JSON.stringify({ node: 'twin-node', since: Date.now(), instance: 'intruder-1', host: 'clone-vm', pid: 4242 }),
        );
      const net = network(first, 'twins', '10.241.9.0/24');
      await waitFor(
        'the first agent to stop allocating',
        async () => ((await net.call('ADD', 't3')).json?.code === 11 ? true : undefined),
        HANG_BOUND_MS,
      );
      const reply = await net.call('ADD', 't4');
      assert.equal(reply.json?.code, 11, reply.stdout);
      assert.match(String(reply.json?.msg), /taken over by agent instance intruder-1 \(host clone-vm, pid 4242/);
      const status = await warren({ command: 'STATUS', config: net.config });
      assert.equal(status.json?.code, 50, status.stdout);
      const announced = JSON.parse((await raw.get('/store-safety-twins/nodes/twin-node').string()) ?? '{}') as {
        instance?: string;
      };
      assert.equal(announced.instance, 'intruder-1', 'the first agent did not take the announcement back');
    } finally {
      raw.close();
    }
  });

  it('an agent killed with -9 starts again at once on its state directory, though its old lease is still alive', async () => {
    // A lease far longer than startAgent waits: the restart must take its own announcement over, not wait.
    const args = nodeArgs('phoenix-node', etcd, '/store-safety-phoenix/', ['--node-lease', '60']);
    const killed = await startAgent({ args });
    const net = network(killed, 'phoenix', '10.241.10.0/24');
    const added = await net.call('ADD', 'p1');
    assert.equal(added.code, 0, added.stdout);
    await killed.kill();

    const again = await startAgent({ dir: killed.dir, args });
    agents.push(again);
    const retried = await net.call('ADD', 'p1');
    assert.equal(retried.code, 0, retried.stdout);
    assert.deepEqual(resultAddresses(retried), resultAddresses(added), 'the retried ADD gets the address it had');
    assert.equal((await net.call('ADD', 'p2')).code, 0);
    const status = JSON.parse((await cli(again, 'status', '--json')).stdout) as {
      ready: boolean;
      cluster?: { thisNodeAnnounced: boolean };
    };
    assert.equal(status.ready, true);
    assert.equal(status.cluster?.thisNodeAnnounced, true);
  });

  it('an agent killed with -9 whose state directory was put back from a copy older than its last start starts again at once', async () => {
    // Found by the soak on etcd (seed 11): the copy records the start before the killed one, so the
    // killed one's announcement (its lease still alive) named no instance the agent knew, and it
    // refused to start (ALREADY_RUNNING) until the lease lapsed. Its process is gone on this boot.
    const args = nodeArgs('restored-dir-node', etcd, '/store-safety-restored-dir/', ['--node-lease', '60']);
    const first = await startAgent({ args });
    await first.kill();
    const copy = tempDir('warren-state-copy-');
    cpSync(first.dir, copy, { recursive: true, filter: (src) => !src.endsWith('.sock') });
    const second = await startAgent({ dir: first.dir, args });
    const net = network(second, 'restoreddir', '10.241.11.0/24');
    assert.equal((await net.call('ADD', 'r1')).code, 0);
    await second.kill();
    rmSync(first.dir, { recursive: true, force: true });
    cpSync(copy, first.dir, { recursive: true });

    const third = await startAgent({ dir: first.dir, args });
    agents.push(third);
    assert.equal((await net.call('ADD', 'r2')).code, 0);
    const status = JSON.parse((await cli(third, 'status', '--json')).stdout) as {
      cluster?: { thisNodeAnnounced: boolean };
    };
    assert.equal(status.cluster?.thisNodeAnnounced, true);
  });
});

/**
 * The command line against a running agent: human output, --json, release, and clear failures.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { warren } from '../helpers/cni.ts';
import { WARREN_BIN, run } from '../helpers/processes.ts';

describe('warren CLI', () => {
  let agent: AgentHandle;
  const cli = (...args: string[]) => run(process.execPath, [WARREN_BIN, ...args, '--socket', agent.socket]);

  before(async () => {
    agent = await startAgent();
    const conf = {
      cniVersion: '1.0.0',
      name: 'clinet',
      ipam: { type: 'warren', socket: agent.socket, range: '10.219.0.0/28', exclude: ['10.219.0.8/29'] },
    };
    for (const id of ['cli-a', 'cli-b', 'cli-c']) {
      const r = await warren({
        command: 'ADD',
        containerID: id,
        netns: '/x',
        ifname: 'eth0',
        args: `K8S_POD_NAMESPACE=team;K8S_POD_NAME=${id}-pod;K8S_POD_UID=uid-${id}`,
        config: conf,
      });
      assert.equal(r.code, 0, r.stdout);
    }
  });
  after(async () => {
    await agent.stop();
  });

  it('shows status', async () => {
    const r = await cli('status');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /ready:\s+yes/);
    assert.match(r.stdout, /allocations: 3/);
    const json = JSON.parse((await cli('status', '--json')).stdout);
    assert.equal(json.node, 'test-node');
    assert.equal(json.allocations, 3);
  });

  it('shows pool utilisation, an IPv6 /64 as people read it', async () => {
    const v6Call = {
      command: 'ADD',
      containerID: 'cli-v6',
      netns: '/x',
      ifname: 'eth0',
      config: {
        cniVersion: '1.0.0',
        name: 'clinet6',
        ipam: { type: 'warren', socket: agent.socket, range: 'fd00:219::/64' },
      },
    };
    const v6 = await warren(v6Call);
    assert.equal(v6.code, 0, v6.stdout);
    const r = await cli('pools');
    assert.match(r.stdout, /10\.219\.0\.0\/28\s+10\.219\.0\.1-10\.219\.0\.14\s+7\s+3\s+0\s+42\.9%/);
    assert.match(r.stdout, /^fd00:219::\/64\s+\S+\s+2\^64 − \d+\s+1\s+0\s+<?0\.0%/m, r.stdout);
    const v6Pool = (
      JSON.parse((await cli('pools', '--json')).stdout) as Array<{ pool: string; capacity: string }>
    ).find((p) => p.pool === 'fd00:219::/64');
    assert.match(v6Pool?.capacity ?? '', /^1844674407370955\d{4}$/, 'the JSON keeps the exact decimal');
    const del = await warren({ ...v6Call, command: 'DEL' });
    assert.equal(del.code, 0, del.stdout); // the other tests count this network's three
    const [pool] = JSON.parse((await cli('pools', '--json')).stdout);
    assert.deepEqual([pool.pool, pool.capacity, pool.allocated], ['10.219.0.0/28', '7', 3]);
  });

  it('lists and filters allocations', async () => {
    const all = JSON.parse((await cli('allocations', '--json')).stdout);
    assert.equal(all.length, 3);
    // Timestamps in --json are RFC 3339, as every other moment the CLI prints.
    for (const a of all as Array<{ createdAt: unknown }>) {
      assert.match(String(a.createdAt), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    }
    const one = JSON.parse((await cli('allocations', '--pod', 'cli-b-pod', '--json')).stdout);
    assert.deepEqual(
      one.map((a: { containerID: string; podUID: string }) => [a.containerID, a.podUID]),
      [['cli-b', 'uid-cli-b']],
    );
    const text = (await cli('allocations', '--namespace', 'team')).stdout;
    assert.match(text, /^ADDRESS\s+POOL/);
    assert.match(text, /team\/cli-a-pod/);
  });

  it('releases by address and by container, and says when there is nothing to release', async () => {
    const [a] = JSON.parse((await cli('allocations', '--container', 'cli-a', '--json')).stdout);
    const byAddress = await cli('release', '--address', a.address);
    assert.match(
      byAddress.stdout,
      new RegExp(`released ${a.address.replace(/\./g, '\\.')} from 10\\.219\\.0\\.0/28 \\(container cli-a`),
    );
    const byContainer = JSON.parse((await cli('release', '--container', 'cli-b', '--json')).stdout);
    assert.equal(byContainer.released.length, 1);
    assert.match((await cli('release', '--container', 'cli-b')).stdout, /nothing to release/);
    assert.equal(JSON.parse((await cli('allocations', '--json')).stdout).length, 1);
  });

  it('exits 2 on a usage error and 1 when the agent is down', async () => {
    const bad = await run(process.execPath, [WARREN_BIN, 'frobnicate']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /unknown command "frobnicate"/);
    const noFlag = await cli('release');
    assert.equal(noFlag.code, 2);
    const down = await run(process.execPath, [WARREN_BIN, 'status', '--socket', `${agent.dir}/none.sock`]);
    assert.equal(down.code, 1);
    assert.match(down.stderr, /not reachable.*\n.*is the agent running/);
  });

  it("prints the command line parser's own messages as lines, not with \\x0a, still escaping what the user typed", async () => {
    const r = await run(process.execPath, [WARREN_BIN, 'status', '--socket', '--json']);
    assert.equal(r.code, 2);
    assert.doesNotMatch(r.stderr, /\\x0a/);
    assert.match(
      r.stderr,
      /^warren: Option '--socket' argument is ambiguous\.\nDid you forget to specify the option argument for '--socket'\?\n/,
    );
    const hostile = await run(process.execPath, [WARREN_BIN, 'status', '--x\x1b[2J']);
    assert.equal(hostile.code, 2);
    assert.match(hostile.stderr, /Unknown option '--x\\x1b\[2J'/);
  });

  it("shows the agent's error code and message when it refuses, and exits 1", async () => {
    const badAddress = await cli('release', '--address', 'not-an-ip');
    assert.equal(badAddress.code, 1);
    assert.equal(badAddress.stderr, 'warren: BAD_REQUEST: release: address "not-an-ip" is not an IP address\n');
    const nodes = await cli('nodes');
    assert.equal(nodes.code, 1);
    assert.match(
      nodes.stderr,
      /^warren: BAD_REQUEST: store .* is not shared by nodes; nodes exist with --store etcd\n$/,
    );
    assert.doesNotMatch(nodes.stderr, /agent refused/);
  });

  it('prints the agent help and exits 0 on `warren agent --help` instead of a usage error', async () => {
    for (const flag of ['--help', '-h']) {
      const r = await run(process.execPath, [WARREN_BIN, 'agent', flag]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^usage: warren agent/);
      assert.match(r.stdout, /--journal-dir\s+WARREN_JOURNAL_DIR/);
      assert.equal(r.stderr, '');
    }
  });

  describe('with long container IDs and recorded strings from pods', () => {
    // Two IDs that the tables cut to the same 16 characters, and one they cut to a unique prefix.
    const twinA = `abcdef0123456789${'a'.repeat(48)}`;
    const twinB = `abcdef0123456789${'b'.repeat(48)}`;
    const single = `fedcba9876543210${'c'.repeat(48)}`;
    const hostile = 'evil\x1b[2J\x1b[31m\nFORGED line\x9b-pod';

    before(async () => {
      const conf = {
        cniVersion: '1.0.0',
        name: 'clinet2',
        ipam: { type: 'warren', socket: agent.socket, range: '10.219.1.0/28' },
      };
      const pods: Array<[string, string]> = [
        [twinA, 'K8S_POD_NAME=lonely-pod'],
        [twinB, 'K8S_POD_NAMESPACE=team;K8S_POD_NAME=twin-b'],
        [single, 'K8S_POD_NAMESPACE=team;K8S_POD_NAME=single'],
        ['hostile-1', `K8S_POD_NAMESPACE=team;K8S_POD_NAME=${hostile}`],
      ];
      for (const [id, args] of pods) {
        const r = await warren({ command: 'ADD', containerID: id, netns: '/x', ifname: 'eth0', args, config: conf });
        assert.equal(r.code, 0, r.stdout);
      }
    });

    it('accepts the unique 16-character container prefix the table shows, in allocations and release', async () => {
      const shown = single.slice(0, 16);
      const table = (await cli('allocations', '--network', 'clinet2')).stdout;
      assert.match(table, new RegExp(`\\b${shown}\\b`));
      assert.doesNotMatch(table, new RegExp(single));
      const listed = await cli('allocations', '--container', shown, '--json');
      assert.equal(listed.code, 0, listed.stderr);
      assert.deepEqual(
        JSON.parse(listed.stdout).map((a: { containerID: string }) => a.containerID),
        [single],
      );
      const released = await cli('release', '--container', shown, '--prefix');
      assert.equal(released.code, 0, released.stderr);
      assert.match(
        released.stdout,
        new RegExp(`^released 10\\.219\\.1\\.\\d+ from 10\\.219\\.1\\.0/28 \\(container ${single}, eth0\\)$`, 'm'),
      );
      assert.deepEqual(await agent.allocations(`?containerID=${single}`), []);
    });

    it('refuses a container prefix that several containers share, listing them, and releases nothing', async () => {
      const shared = twinA.slice(0, 16);
      for (const args of [['allocations'], ['release', '--prefix']]) {
        const command = args.join(' ');
        const r = await cli(...args, '--container', shared);
        assert.equal(r.code, 1, `${command}: ${r.stdout}`);
        assert.match(
          r.stderr,
          new RegExp(`container "${shared}" is the beginning of 2 container IDs.*${twinA}, ${twinB}`),
        );
      }
      assert.equal((await agent.allocations('?network=clinet2')).length, 3);
      // One character more, or the whole ID, names one of them.
      const longer = JSON.parse((await cli('allocations', '--container', twinA.slice(0, 17), '--json')).stdout);
      assert.deepEqual(
        longer.map((a: { containerID: string }) => a.containerID),
        [twinA],
      );
      const exact = JSON.parse((await cli('allocations', '--container', twinB, '--json')).stdout);
      assert.deepEqual(
        exact.map((a: { containerID: string }) => a.containerID),
        [twinB],
      );
    });

    it('release --container c never releases c1 by prefix: an ID that is only the beginning of one is refused without --prefix', async () => {
      const shown = twinB.slice(0, 17);
      const refused = await cli('release', '--container', shown);
      assert.equal(refused.code, 1, refused.stdout);
      assert.match(
        refused.stderr,
        new RegExp(`no container has the ID "${shown}"; it is the beginning of the container ID ${twinB}.*--prefix`),
      );
      assert.equal((await agent.allocations(`?containerID=${twinB}`)).length, 1, 'nothing released');
    });

    it('shows a pod without a namespace as its name, not "/name"', async () => {
      const table = (await cli('allocations', '--network', 'clinet2')).stdout;
      assert.match(table, / lonely-pod /);
      assert.doesNotMatch(table, /\/lonely-pod/);
      assert.match(table, / team\/twin-b /);
    });

    it('prints pod names with control characters escaped, so a hostile pod name cannot forge terminal output', async () => {
      const r = await cli('allocations', '--pod', hostile);
      assert.equal(r.code, 0, r.stderr);
      // biome-ignore lint/suspicious/noControlCharactersInRegex: the test looks for control characters
      assert.doesNotMatch(r.stdout, /[\x00-\x09\x0b-\x1f\x7f-\x9f]/);
      assert.doesNotMatch(r.stdout, /^FORGED/m);
      assert.ok(r.stdout.includes('team/evil\\x1b[2J\\x1b[31m\\x0aFORGED line\\x9b-pod'), r.stdout);
      assert.equal(r.stdout.trimEnd().split('\n').length, 2, r.stdout);
      // --json keeps the recorded string as it is.
      const [json] = JSON.parse((await cli('allocations', '--pod', hostile, '--json')).stdout);
      assert.equal(json.podName, hostile);
    });
  });
});

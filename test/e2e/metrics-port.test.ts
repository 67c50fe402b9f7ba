/**
 * The metrics port of a real agent (bin/warren) cannot starve its CNI service, and answers the
 * kubelet's probes: under a 1,024-descriptor limit, 1,100 idle TCP connections opened to it (by a
 * real TCP client in another process) leave ADD through the real plugin working; /healthz answers
 * while a readiness problem makes /readyz 503 with the reason, and /readyz turns 200 once it is gone;
 * /livez stays 200 through a burst of 200 ADDs (the agent busy is not the agent dead: a liveness
 * probe failing then would restart an agent that is working).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ApiClient } from '../../src/api/client.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { HANG_BOUND_MS, CHILD_PATH, isGone, isRoot, sh, tempDir, track, waitFor } from '../helpers/processes.ts';

const CONNECTIONS = 1_100;
const DESCRIPTORS = 1_024;

async function metricsAddressOf(agent: AgentHandle): Promise<string> {
  return waitFor(
    'the agent to report its metrics address',
    async () => (await new ApiClient({ socket: agent.socket }).status()).metrics?.address,
  );
}

describe('the metrics port of a real agent', () => {
  const agents: AgentHandle[] = [];
  const children: ChildProcess[] = [];
  after(async () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await waitFor(
        `process ${child.pid} to die`,
        () => (isGone(child.pid as number) ? true : undefined),
        HANG_BOUND_MS,
      );
    }
    for (const agent of agents) await agent.kill();
  });

  it(`an agent under a ${DESCRIPTORS}-descriptor limit with ${CONNECTIONS} idle TCP connections on its metrics port still answers ADD through the real plugin`, {
    skip: isRoot() ? false : 'needs root for prlimit on another process',
  }, async () => {
    const agent = await startAgent({ args: ['--metrics-address', '127.0.0.1:0'] });
    agents.push(agent);
    await sh('prlimit', ['--pid', String(agent.pid), `--nofile=${DESCRIPTORS}:${DESCRIPTORS}`]);
    const address = await metricsAddressOf(agent);
    const [host, port] = [
      address.slice(0, address.lastIndexOf(':')),
      Number(address.slice(address.lastIndexOf(':') + 1)),
    ];

    // The client: its own process with room for the connections, each opened and left idle.
    const script = `
      const net = require('node:net');
      const [host, port, n] = process.argv.slice(1);
      const sockets = [];
      let connected = 0;
      (async () => {
        for (let i = 0; i < Number(n); i++) {
          await new Promise((ok) => {
            const s = net.connect(Number(port), host);
            sockets.push(s);
            const timer = setTimeout(ok, 5000);
            s.once('connect', () => { connected++; clearTimeout(timer); ok(); });
            s.once('error', () => { clearTimeout(timer); ok(); });
          });
        }
        console.log('ready ' + connected + ' connected');
      })();
      setInterval(() => {}, 1 << 30);`;
    const client = track(
      spawn(
        'prlimit',
        [
          `--nofile=${CONNECTIONS + 1_000}:${CONNECTIONS + 1_000}`,
          process.execPath,
          '-e',
          script,
          host,
          String(port),
          String(CONNECTIONS),
        ],
        { env: { PATH: CHILD_PATH }, stdio: ['ignore', 'pipe', 'pipe'] },
      ),
    );
    children.push(client);
    let said = '';
    client.stdout?.on('data', (c: Buffer) => (said += c.toString()));
    client.stderr?.on('data', (c: Buffer) => (said += c.toString()));
    await waitFor(
      `${CONNECTIONS} connections to be opened (${said})`,
      () => (said.includes('ready') ? true : undefined),
      2 * HANG_BOUND_MS,
    );
    assert.match(said, new RegExp(`ready ${CONNECTIONS} connected`), 'every connection was accepted by the kernel');

    const add = await warren({
      command: 'ADD',
      containerID: 'flood-1',
      netns: '/var/run/netns/flood-1',
      ifname: 'eth0',
      config: {
        cniVersion: '1.0.0',
        name: 'flood-net',
        ipam: { type: 'warren', socket: agent.socket, range: '10.219.0.0/24' },
      },
    });
    assert.equal(add.code, 0, `ADD answered: ${add.stdout}${add.stderr}`);
    assert.deepEqual(resultAddresses(add), ['10.219.0.1']);
    const descriptors = readdirSync(`/proc/${agent.pid}/fd`).length;
    assert.ok(
      descriptors < DESCRIPTORS / 2,
      `the agent holds ${descriptors} descriptors with ${CONNECTIONS} connections open to its metrics port`,
    );
    const live = await fetch(`http://${address}/livez`);
    assert.equal(live.status, 200, 'the liveness probe gets through the flood');
  });

  it('/livez answers 200 every time it is asked during a burst of 200 ADDs, and every ADD succeeds', async () => {
    const agent = await startAgent({ args: ['--metrics-address', '127.0.0.1:0'] });
    agents.push(agent);
    const address = await metricsAddressOf(agent);
    const client = new ApiClient({ socket: agent.socket, timeoutMs: HANG_BOUND_MS });
    const config = {
      cniVersion: '1.0.0',
      name: 'burstnet',
      ipam: { type: 'warren', socket: agent.socket, range: '10.218.0.0/22' },
    };
    let bursting = true;
    const probes: number[] = [];
    // The kubelet's probe, asked over and over while the burst runs (each answer awaited: no pile-up).
    const prober = (async () => {
      while (bursting) probes.push((await fetch(`http://${address}/livez`)).status);
    })();
    const outcomes = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        client.cni({ command: 'ADD', containerID: `burst-${i}`, netns: `/x/${i}`, ifname: 'eth0', config }),
      ),
    );
    bursting = false;
    await prober;
    assert.deepEqual(
      outcomes.filter((o) => o.kind !== 'result'),
      [],
      'every ADD of the burst succeeded',
    );
    assert.ok(probes.length > 0, 'the probe was asked during the burst');
    assert.deepEqual(
      probes.filter((status) => status !== 200),
      [],
      `${probes.length} liveness probes during the burst`,
    );
  });

  it('/healthz answers while a readiness problem makes /readyz 503 with the reason; /readyz turns 200 once it is gone', async () => {
    const indicator = join(tempDir('warren-readyz-'), 'primary-ready');
    const agent = await startAgent({
      args: ['--metrics-address', '127.0.0.1:0', '--readiness-indicator-file', indicator],
    });
    agents.push(agent);
    const address = await metricsAddressOf(agent);
    const healthz = await fetch(`http://${address}/healthz`);
    assert.equal(healthz.status, 200);
    assert.equal(await healthz.text(), 'ok\n');
    const readyz = await fetch(`http://${address}/readyz`);
    assert.equal(readyz.status, 503);
    assert.match(await readyz.text(), new RegExp(`^not ready: .*readiness indicator ${indicator} is missing\\n$`));

    writeFileSync(indicator, '');
    try {
      await waitFor(
        '/readyz to answer 200',
        async () => ((await fetch(`http://${address}/readyz`)).status === 200 ? true : undefined),
        HANG_BOUND_MS,
      );
    } finally {
      rmSync(indicator, { force: true });
    }
  });
});

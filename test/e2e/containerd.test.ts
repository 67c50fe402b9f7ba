/**
 * Releases driven by a real containerd (Debian's containerd 1.6 with a private config): container
 * deletes, real and injected task exits against real network namespaces, containerd restarted
 * while a container was deleted out of Warren's sight, and Warren started before containerd.
 * No CNI DEL is sent anywhere in this file.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { requestJson } from '../../src/core/unix-http.ts';
import type { AgentStatus } from '../../src/api/status.ts';
import { encodeAny, encodeMessage } from '../../src/sources/containerd/client.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { type Containerd, haveContainerd, startContainerd } from '../helpers/containerd.ts';
import { createNetns, deleteNetns } from '../helpers/netns.ts';
import { isRoot, tempDir, waitFor } from '../helpers/processes.ts';

const NS = `warren-t${process.pid}`;
const skip = !isRoot() || !haveContainerd() ? 'needs root and containerd, runc, busybox-static' : false;

async function status(agent: AgentHandle): Promise<AgentStatus> {
  return (await requestJson({ socket: agent.socket, method: 'GET', path: '/v1/status' })).body as AgentStatus;
}

describe('releases driven by containerd events', { skip }, () => {
  let containerd: Containerd;
  let agent: AgentHandle;
  const config = () => ({
    cniVersion: '1.1.0',
    name: 'ctd',
    ipam: { type: 'warren', socket: agent.socket, range: '10.240.0.0/24' },
  });
  const add = async (id: string, netns: string) => {
    const reply = await warren({ command: 'ADD', containerID: id, netns, ifname: 'eth0', config: config() });
    assert.equal(reply.code, 0, reply.stdout);
    return resultAddresses(reply)[0] as string;
  };
  const held = async (id: string) => (await agent.allocations(`?containerID=${id}`)).map((a) => a.address);

  before(async () => {
    containerd = await startContainerd();
    agent = await startAgent({
      // No reconcile pass within a test: a release the tests wait for comes from the event itself.
      args: [
        '--containerd',
        'on',
        '--containerd-socket',
        containerd.socket,
        '--containerd-namespaces',
        NS,
        '--netns-dirs',
        '/var/run/netns',
        '--containerd-grace',
        '0',
        '--reconcile-interval',
        '3600',
      ],
    });
    await waitFor('the agent to subscribe to containerd', async () =>
      (await status(agent)).containerd?.state === 'subscribed' ? true : undefined,
    );
  });
  after(async () => {
    await agent?.kill();
    await containerd?.stop([NS]);
  });

  it("releases a container's address on its delete event, with no reconcile pass", async (t) => {
    const netns = await createNetns();
    try {
      const id = 'ctd-delete-1';
      const address = await add(id, netns.path);
      assert.deepEqual(await held(id), [address]);
      const run = await containerd.ctr(NS, 'run', '--rm', '--rootfs', containerd.rootfs, id, '/bin/sh', '-c', 'exit 0');
      assert.equal(run.code, 0, run.stderr);
      const deleted = Date.now();
      // The namespace still exists: only the container's deletion can release it.
      await waitFor('the address to be released', async () => ((await held(id)).length === 0 ? true : undefined));
      t.diagnostic(`released ${Date.now() - deleted} ms after ctr returned from the delete`);
    } finally {
      await deleteNetns(netns.name);
    }
  });

  it('keeps the address of an exited task while its namespace exists, and releases it once the namespace is gone', async () => {
    const netns = await createNetns();
    const id = 'ctd-exit-1';
    const address = await add(id, netns.path);
    const run = await containerd.ctr(NS, 'run', '--rootfs', containerd.rootfs, id, '/bin/sh', '-c', 'exit 3');
    assert.equal(run.code, 3, run.stderr);
    await waitFor('the container to be marked exited', async () =>
      (await status(agent)).containerd?.releases.exited.some((e) => e.containerID === id) ? true : undefined,
    );
    assert.deepEqual(await held(id), [address], 'a task exit alone releases nothing while the namespace exists');
    await deleteNetns(netns.name);
    await waitFor('the address to be released', async () => ((await held(id)).length === 0 ? true : undefined));
    assert.equal(
      (await status(agent)).containerd?.releases.exited.some((e) => e.containerID === id),
      false,
    );
    await containerd.ctr(NS, 'containers', 'delete', id);
  });

  it('does the same for a task exit injected with containerd publish', async () => {
    const netns = await createNetns();
    const id = 'ctd-exit-injected';
    const address = await add(id, netns.path);
    const published = await containerd.publish(
      NS,
      '/tasks/exit',
      encodeAny(
        'containerd.events.TaskExit',
        encodeMessage('TaskExit', { container_id: id, id, pid: 4242, exit_status: 137 }),
      ),
    );
    assert.equal(published.code, 0, published.stderr);
    await waitFor('the container to be marked exited', async () =>
      (await status(agent)).containerd?.releases.exited.some((e) => e.containerID === id) ? true : undefined,
    );
    assert.deepEqual(await held(id), [address]);
    await deleteNetns(netns.name);
    await waitFor('the address to be released', async () => ((await held(id)).length === 0 ? true : undefined));
  });

  it('resynchronises after containerd restarts: releases exactly the containers deleted meanwhile', async () => {
    const netns = await createNetns();
    try {
      for (const id of ['ctd-live', 'ctd-gone']) {
        await add(id, netns.path);
        const created = await containerd.ctr(NS, 'run', '--rootfs', containerd.rootfs, id, '/bin/true');
        assert.equal(created.code, 0, created.stderr);
      }
      await add('ctd-never', netns.path); // an allocation whose container never existed in containerd
      const before = (await status(agent)).containerd?.subscriptions ?? 0;
      await containerd.stopDaemon();
      await waitFor('the agent to notice containerd is gone', async () =>
        (await status(agent)).containerd?.state === 'waiting-for-socket' ? true : undefined,
      );
      // containerd comes back where Warren is not looking, a container is deleted, it stops again.
      const elsewhere = join(tempDir('warren-ctd-other-'), 'other.sock');
      await containerd.start(elsewhere);
      assert.equal((await containerd.ctr(NS, 'containers', 'delete', 'ctd-gone')).code, 0);
      await containerd.stopDaemon();
      assert.equal((await held('ctd-gone')).length, 1, 'nothing is released while Warren cannot see containerd');
      await containerd.start();
      await waitFor('the agent to subscribe again', async () =>
        ((await status(agent)).containerd?.subscriptions ?? 0) > before &&
        (await status(agent)).containerd?.state === 'subscribed'
          ? true
          : undefined,
      );
      await waitFor('the deleted container to be released', async () =>
        (await held('ctd-gone')).length === 0 && (await held('ctd-never')).length === 0 ? true : undefined,
      );
      assert.equal((await held('ctd-live')).length, 1, 'the live container keeps its address');
    } finally {
      await containerd.ctr(NS, 'containers', 'delete', 'ctd-live');
      await deleteNetns(netns.name);
    }
  });
});

describe('Warren started before containerd', { skip }, () => {
  it('waits for the socket and subscribes when containerd appears', async () => {
    const containerd = await startContainerd({ start: false });
    // Not even the socket's directory exists yet.
    const socket = join(containerd.dir, 'later', 'containerd.sock');
    const agent = await startAgent({
      args: ['--containerd', 'on', '--containerd-socket', socket, '--containerd-namespaces', NS],
    });
    try {
      assert.equal((await status(agent)).containerd?.state, 'waiting-for-socket');
      await containerd.start(socket);
      await waitFor('the agent to subscribe', async () =>
        (await status(agent)).containerd?.state === 'subscribed' ? true : undefined,
      );
      const human = await import('../helpers/processes.ts').then(({ run, WARREN_BIN, CHILD_PATH }) =>
        run(process.execPath, [WARREN_BIN, 'status', '--socket', agent.socket], {
          env: { ...process.env, PATH: CHILD_PATH },
        }),
      );
      assert.match(human.stdout, /containerd: +subscribed since/);
    } finally {
      await agent.kill();
      await containerd.stop([NS]);
    }
  });
});

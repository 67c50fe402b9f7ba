/**
 * A DEL whose network config is invalid (issue 34, item 14): it failed with code 7, so the runtime
 * retried it for ever and the address stayed held (seen through Multus with a broken
 * NetworkAttachmentDefinition). A DEL needs only the network name, the container ID and the
 * interface: the real plugin and a real agent release by those when the agent answers, the
 * plugin journals by them when it does not, nothing of another network is touched, and only a
 * config that does not even name its network is refused.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { resultAddresses, warren } from '../helpers/cni.ts';
import { waitFor } from '../helpers/processes.ts';

describe('DEL with an invalid network config', () => {
  let agent: AgentHandle;
  before(async () => {
    agent = await startAgent({ args: ['--reconcile-interval', '3600'] });
  });
  after(async () => {
    await agent?.stop();
  });

  const good = (name: string, range: string, socket = agent.socket) => ({
    cniVersion: '1.0.0',
    name,
    ipam: { type: 'warren', socket, journal_dir: join(agent.dir, 'journal'), range },
  });
  /** The same network's config, broken as an edited NetworkAttachmentDefinition can be. */
  const broken = (name: string, socket = agent.socket) => ({
    cniVersion: '1.0.0',
    name,
    ipam: {
      type: 'warren',
      socket,
      journal_dir: join(agent.dir, 'journal'),
      range: '10.34.14.0/33',
      no_such_key: true,
    },
  });
  const call = (command: string, containerID: string, config: unknown) =>
    warren({ command, containerID, netns: `/x/${containerID}`, ifname: 'eth0', config });
  const held = async (network: string, containerID: string) =>
    (await agent.allocations(`?network=${network}`)).filter((a) => a.containerID === containerID).map((a) => a.address);

  it("releases the attachment's address by network, container and interface, and nothing of another network", async () => {
    const a = await call('ADD', 'c-1', good('inv-a', '10.34.14.0/24'));
    const b = await call('ADD', 'c-1', good('inv-b', '10.34.15.0/24'));
    assert.equal(a.code, 0, a.stdout);
    assert.equal(b.code, 0, b.stdout);
    const del = await call('DEL', 'c-1', broken('inv-a'));
    assert.equal(del.code, 0, del.stdout);
    assert.equal(del.stdout, '');
    assert.deepEqual(await held('inv-a', 'c-1'), []);
    assert.deepEqual(await held('inv-b', 'c-1'), resultAddresses(b), "the other network's address stays");
  });

  it('journals it by the same three when the agent is not reached, and the agent releases it from the journal', async () => {
    const add = await call('ADD', 'c-2', good('inv-a', '10.34.14.0/24'));
    assert.equal(add.code, 0, add.stdout);
    const del = await call('DEL', 'c-2', broken('inv-a', join(agent.dir, 'elsewhere.sock')));
    assert.equal(del.code, 0, del.stdout);
    await waitFor('the journaled DEL to be released', async () =>
      (await held('inv-a', 'c-2')).length === 0 ? true : undefined,
    );
    assert.deepEqual(
      readdirSync(join(agent.dir, 'journal')).filter((n) => n.endsWith('.release')),
      [],
    );
  });

  it('refuses (7) only a config that does not name its network, releasing nothing', async () => {
    const add = await call('ADD', 'c-3', good('inv-a', '10.34.14.0/24'));
    assert.equal(add.code, 0, add.stdout);
    const { name: _, ...nameless } = broken('inv-a');
    const del = await call('DEL', 'c-3', nameless);
    assert.equal(del.json?.code, 7, del.stdout);
    assert.match(String(del.json?.msg), /name is missing: the DEL cannot be recorded/);
    assert.deepEqual(await held('inv-a', 'c-3'), resultAddresses(add));
  });
});

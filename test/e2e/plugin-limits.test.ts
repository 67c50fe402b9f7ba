/**
 * The plugin's input limits, through the real executable and agent (issue 10): a config nested
 * too deep to walk is refused or, for DEL, journaled, never a stack overflow (code 5); a config as
 * large as the plugin reads fits in the request the agent reads.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAX_CONFIG_BYTES } from '../../src/api/limits.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { warren } from '../helpers/cni.ts';
import { waitFor } from '../helpers/processes.ts';

/** `{..., "x": [[[...]]]}`: a config `depth` arrays deep below its top level. */
function deepConfig(top: Record<string, unknown>, depth: number): string {
  return `${JSON.stringify(top).slice(0, -1)},"x":${'['.repeat(depth)}${']'.repeat(depth)}}`;
}

describe('plugin input limits', () => {
  let agent: AgentHandle;
  let journal: string;
  before(async () => {
    agent = await startAgent();
    journal = join(agent.dir, 'journal');
  });
  after(async () => {
    await agent.stop();
  });

  const conf = (name: string) => ({
    cniVersion: '1.0.0',
    name,
    ipam: { type: 'warren', socket: agent.socket, journal_dir: journal, range: '10.214.0.0/24' },
  });

  it('keeps the promise of a DEL whose config is nested 100000 levels deep instead of failing with code 5', async () => {
    const add = await warren({
      command: 'ADD',
      containerID: 'deep-1',
      netns: '/var/run/netns/deep',
      ifname: 'eth0',
      config: conf('deepnet'),
    });
    assert.equal(add.code, 0, add.stdout);
    const del = await warren({
      command: 'DEL',
      containerID: 'deep-1',
      ifname: 'eth0',
      config: deepConfig(conf('deepnet'), 100_000),
    });
    assert.equal(del.code, 0, del.stdout);
    assert.equal(del.stdout, '');
    // Released at once, or journaled for the agent to release: either keeps the promise.
    const outcome = await waitFor('the DEL to be released or journaled', async () => {
      if ((await agent.allocations('?containerID=deep-1')).length === 0) return 'released';
      const files = existsSync(journal) ? readdirSync(journal).filter((n) => n.startsWith('deep-1')) : [];
      return files.length > 0 ? 'journaled' : undefined;
    });
    assert.ok(outcome === 'released' || outcome === 'journaled');
  });

  it('refuses an ADD whose config is nested 100000 levels deep with code 7 naming the nesting, not a stack overflow', async () => {
    const add = await warren({
      command: 'ADD',
      containerID: 'deep-2',
      netns: '/var/run/netns/deep',
      ifname: 'eth0',
      config: deepConfig(conf('deepnet'), 100_000),
    });
    assert.equal(add.code, 1);
    assert.equal(add.json?.code, 7, add.stdout);
    assert.match(String(add.json?.msg), /nests arrays and objects more than \d+ levels deep/);
    assert.deepEqual(await agent.allocations('?containerID=deep-2'), []);
  });

  it('lets a config at the plugin stdin limit through to the agent instead of the agent answering HTTP 413', async () => {
    const base = { ...conf('bignet'), pad: '' };
    const config = { ...base, pad: 'x'.repeat(MAX_CONFIG_BYTES - JSON.stringify(base).length) };
    assert.equal(Buffer.byteLength(JSON.stringify(config)), MAX_CONFIG_BYTES);
    // A long CNI_ARGS too: the request wraps the config with the CNI variables.
    const args = `IgnoreUnknown=1;K8S_POD_NAMESPACE=big;K8S_POD_NAME=big-pod;PAD=${'p'.repeat(100_000)}`;
    const add = await warren({
      command: 'ADD',
      containerID: 'big-1',
      netns: '/var/run/netns/big',
      ifname: 'eth0',
      args,
      config,
    });
    assert.equal(add.code, 0, add.stdout.slice(0, 500));
    assert.equal((await agent.allocations('?containerID=big-1')).length, 1);
  });

  it('refuses a config one byte past the stdin limit with code 6 naming the limit', async () => {
    const base = { ...conf('bignet'), pad: '' };
    const config = { ...base, pad: 'x'.repeat(MAX_CONFIG_BYTES + 1 - JSON.stringify(base).length) };
    const add = await warren({
      command: 'ADD',
      containerID: 'big-2',
      netns: '/var/run/netns/big',
      ifname: 'eth0',
      config,
    });
    assert.equal(add.json?.code, 6, add.stdout.slice(0, 500));
    assert.match(String(add.json?.msg), new RegExp(`larger than ${MAX_CONFIG_BYTES} bytes`));
  });
});

/**
 * `warren uninstall` with the agent's config manager off (issue 34, item 12): the multus overlay
 * and the systemd unit's default. It refused (BAD_REQUEST) and left the plugin in the CNI bin dir.
 * Now it hands the node back (ADD refused, naming uninstall) and removes the plugin once no pod
 * holds an address through it; while one does, the plugin stays for that pod's DEL (the configs
 * naming warren are the operator's), the command says so and exits 3. A real agent, the real
 * plugin as `warren install` puts it in a bin dir of this file's own. With the config manager on,
 * test/e2e/takeover.test.ts follows the same command through a host-local takeover.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { UninstallReport } from '../../src/api/status.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { cniBinDir } from '../helpers/cni.ts';
import { CHILD_PATH, REPO, WARREN_BIN, run, tempDir } from '../helpers/processes.ts';

const NETWORK = 'uninstall-off';

/** A CNI error's fields (a result has none of them). */
interface CniAnswer {
  readonly code?: number;
  readonly msg?: string;
}

/** `warren uninstall --json`: the agent's report and what the command did with the plugin. */
type Report = Partial<UninstallReport> & { readonly pluginRemoved?: string[]; readonly pluginKept?: string };

describe('warren uninstall with the config manager off', () => {
  const binDir = tempDir('warren-uninstall-bin-');
  let agent: AgentHandle;

  /** A CNI call through the plugin installed in binDir, as a runtime (or Multus) makes it. */
  async function cni(
    command: string,
    containerID: string,
  ): Promise<{ code: number | null; json: CniAnswer | undefined }> {
    const r = await run(join(binDir, 'warren'), [], {
      env: {
        PATH: CHILD_PATH,
        CNI_COMMAND: command,
        CNI_CONTAINERID: containerID,
        CNI_NETNS: `/x/${containerID}`,
        CNI_IFNAME: 'eth0',
        CNI_PATH: binDir,
      },
      stdin: JSON.stringify({
        cniVersion: '1.0.0',
        name: NETWORK,
        ipam: { type: 'warren', socket: agent.socket, range: '10.34.12.0/24' },
      }),
    });
    return { code: r.code, json: r.stdout.trim() === '' ? undefined : (JSON.parse(r.stdout) as CniAnswer) };
  }

  async function uninstall(): Promise<{ code: number | null; report: Report; stderr: string }> {
    const u = await run(process.execPath, [
      WARREN_BIN,
      'uninstall',
      '--json',
      '--socket',
      agent.socket,
      '--cni-bin-dir',
      binDir,
    ]);
    return { code: u.code, report: (u.stdout.trim() === '' ? {} : JSON.parse(u.stdout)) as Report, stderr: u.stderr };
  }

  before(async () => {
    cniBinDir(); // builds the plugin once
    const r = spawnSync(process.execPath, [WARREN_BIN, 'install', '--cni-bin-dir', binDir, '--link'], {
      cwd: REPO,
      env: { PATH: CHILD_PATH },
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    // --manage-cni-config off is the default (the systemd unit's; the multus overlay sets it).
    agent = await startAgent();
  });
  after(async () => {
    await agent?.stop();
  });

  it('hands the node back and keeps the plugin while a pod still holds an address through it, saying why', async () => {
    const add = await cni('ADD', 'pod-a');
    assert.equal(add.code, 0, JSON.stringify(add.json));
    const u = await uninstall();
    assert.equal(u.code, 3, `${u.stderr}${JSON.stringify(u.report)}`);
    assert.equal(u.report.configRemoved, false);
    assert.equal(u.report.held, 1);
    assert.deepEqual(u.report.pluginRemoved, []);
    assert.match(u.report.pluginKept ?? '', /still hold 1 address through Warren.*delete those pods/);
    assert.ok(existsSync(join(binDir, 'warren')), 'the plugin stays for the DEL to come');
    // Handed back: a new pod is refused (try again later), naming the command.
    const refused = await cni('ADD', 'pod-b');
    assert.equal(refused.json?.code, 11, JSON.stringify(refused.json));
    assert.match(String(refused.json?.msg), /warren uninstall/);
  });

  it("removes the plugin once the last pod's DEL went through it", async () => {
    const del = await cni('DEL', 'pod-a');
    assert.equal(del.code, 0, JSON.stringify(del.json));
    assert.deepEqual(await agent.allocations(`?network=${NETWORK}`), []);
    const u = await uninstall();
    assert.equal(u.code, 0, `${u.stderr}${JSON.stringify(u.report)}`);
    assert.equal(u.report.held, 0);
    assert.deepEqual(u.report.pluginRemoved, [join(binDir, 'warren'), join(binDir, 'warren.d')]);
    assert.equal(existsSync(join(binDir, 'warren')), false);
    assert.equal(existsSync(join(binDir, 'warren.d')), false);
  });
});

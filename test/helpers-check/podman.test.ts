/**
 * The podman harness (test/helpers/podman.ts) against Debian's podman 4.3 itself: a container runs
 * on a bridge + host-local network and gets an address, podman hands CNI the full container ID and
 * a /run/netns/netns-<uuid> namespace, and close() leaves nothing behind — no mount under the dir,
 * no namespace, no libcni cache entry, no runc state, no dir — for a container still running and
 * for one whose CNI DEL failed (podman removes it and its namespace anyway; libcni keeps its entry). Nothing sleeps: waits are polls with deadlines.
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { BUSYBOX_IMAGE, REFERENCE_CNI_DIR, processesUsing, requirePodman, startPodman } from '../helpers/podman.ts';
import { tempDir, waitFor } from '../helpers/processes.ts';
import { mountsUnder } from '../helpers/mounts.ts';

interface CniCall {
  readonly command: string;
  readonly containerID: string;
  readonly netns: string;
  readonly args: string;
}

/** A plugin dir whose `bridge` records each call and fails DEL while `failDel` exists. */
function recordingBridge(): { dir: string; calls: () => CniCall[]; failDel: string } {
  const dir = tempDir('warren-podman-rec-');
  const log = join(dir, 'calls.log');
  const failDel = join(dir, 'fail-del');
  writeFileSync(
    join(dir, 'bridge'),
    [
      '#!/bin/sh',
      `printf '%s\\t%s\\t%s\\t%s\\n' "$CNI_COMMAND" "$CNI_CONTAINERID" "$CNI_NETNS" "$CNI_ARGS" >> '${log}'`,
      `if [ "$CNI_COMMAND" = DEL ] && [ -e '${failDel}' ]; then echo '{"cniVersion":"0.4.0","code":11,"msg":"DEL refused by the test"}'; exit 1; fi`,
      `exec ${join(REFERENCE_CNI_DIR, 'bridge')}`,
      '',
    ].join('\n'),
  );
  chmodSync(join(dir, 'bridge'), 0o755);
  const calls = (): CniCall[] =>
    existsSync(log)
      ? readFileSync(log, 'utf8')
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => {
            const [command = '', containerID = '', netns = '', args = ''] = l.split('\t');
            return { command, containerID, netns, args };
          })
      : [];
  return { dir, calls, failDel };
}

function cniResultsFor(id: string): string[] {
  try {
    return readdirSync('/var/lib/cni/results').filter((n) => n.includes(id));
  } catch {
    return [];
  }
}

describe('the podman harness', () => {
  it('podman is installed (the podman tests fail, not skip, without it)', () => {
    requirePodman();
  });

  it('runs a container on a bridge + host-local network, and close() leaves nothing behind', async (t) => {
    const recorder = recordingBridge();
    const podman = await startPodman({ cniPluginDirs: [recorder.dir] });
    const net = podman.bridgeNetwork();
    t.after(async () => {
      await podman.close();
      await podman.deleteBridge(net.bridge);
    });

    const id = await podman.ok([
      'run',
      '-d',
      '--name',
      'wrp-check-run',
      '--network',
      net.name,
      BUSYBOX_IMAGE,
      'sleep',
      '1000',
    ]);
    assert.match(id, /^[0-9a-f]{64}$/);
    const address = await podman.ok([
      'inspect',
      '--format',
      `{{(index .NetworkSettings.Networks "${net.name}").IPAddress}}`,
      id,
    ]);
    assert.ok(address.startsWith(net.prefix), `address ${address} in ${net.subnet}`);
    const netns = await podman.ok(['inspect', '--format', '{{.NetworkSettings.SandboxKey}}', id]);
    assert.match(netns, /^\/run\/netns\/netns-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.ok(existsSync(netns));

    // What podman hands CNI: the full ID (as `ps --no-trunc` lists it), the namespace, the name.
    const add = recorder.calls().find((c) => c.command === 'ADD');
    assert.deepEqual(add, {
      command: 'ADD',
      containerID: id,
      netns,
      args: 'IgnoreUnknown=1;K8S_POD_NAME=wrp-check-run',
    });
    assert.equal(await podman.ok(['ps', '-a', '--no-trunc', '--format', '{{.ID}}']), id);

    // A second container whose CNI DEL fails: podman removes it and its namespace, not libcni's entry.
    writeFileSync(recorder.failDel, '');
    const stuck = await podman.ok([
      'run',
      '-d',
      '--name',
      'wrp-check-stuck',
      '--network',
      net.name,
      BUSYBOX_IMAGE,
      'sleep',
      '1000',
    ]);
    const stuckNetns = await podman.ok(['inspect', '--format', '{{.NetworkSettings.SandboxKey}}', stuck]);
    await podman.rm(stuck);
    assert.ok(
      recorder.calls().some((c) => c.command === 'DEL' && c.containerID === stuck),
      'the failing DEL was tried',
    );
    assert.equal(existsSync(stuckNetns), false);
    assert.equal(cniResultsFor(stuck).length, 1, "libcni kept the failed container's entry");
    assert.ok(mountsUnder(podman.dir).length > 0, 'podman mounted something under its dir');

    // The first container is still running when close() comes.
    await podman.close();
    assert.equal(existsSync(podman.dir), false, 'the dir is gone');
    // podman's own cleanup processes, started by conmon, would make its storage dirs again: none is left to.
    await waitFor('no process to name the dir', () => (processesUsing(podman.dir).length === 0 ? true : undefined));
    assert.equal(existsSync(podman.dir), false, 'the dir stays gone once podman is done with it');
    assert.deepEqual(mountsUnder(podman.dir), []);
    for (const [cid, ns] of [
      [id, netns],
      [stuck, stuckNetns],
    ] as const) {
      assert.equal(existsSync(ns), false, `namespace ${ns} is gone`);
      assert.deepEqual(cniResultsFor(cid), []);
      assert.equal(existsSync(join('/run/runc', cid)), false);
    }
  });

  it('a container that exits has its network torn down by podman at once (its namespace goes)', async (t) => {
    const podman = await startPodman();
    const net = podman.bridgeNetwork();
    t.after(async () => {
      await podman.close();
      await podman.deleteBridge(net.bridge);
    });
    const id = await podman.ok([
      'run',
      '-d',
      '--network',
      net.name,
      BUSYBOX_IMAGE,
      'sh',
      '-c',
      'while [ ! -e /tmp/go ]; do sleep 0.05; done',
    ]);
    const netns = await podman.ok(['inspect', '--format', '{{.NetworkSettings.SandboxKey}}', id]);
    assert.ok(existsSync(netns));
    await podman.ok(['exec', id, 'sh', '-c', 'echo > /tmp/go']);
    await waitFor('the container to exit', async () =>
      (await podman.ok(['inspect', '--format', '{{.State.Status}}', id])) === 'exited' ? true : undefined,
    );
    await waitFor(`namespace ${netns} to go`, () => (existsSync(netns) ? undefined : true));
    assert.equal(await podman.ok(['inspect', '--format', '{{.NetworkSettings.SandboxKey}}', id]), '');
  });
});

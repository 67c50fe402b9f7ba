/**
 * A pod's sandbox as a real containerd's CRI plugin keeps it (Debian's containerd 1.6,
 * test/helpers/cri.ts), read the way the agent reads it for a migrated address
 * (src/sources/containerd/pod-sandboxes.ts): listed by the sandbox kind, each with its pod's UID and
 * the network namespace its runtime spec names, which is the one the CNI ADD was given; gone once
 * the sandbox is removed.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { ContainerdClient } from '../../src/sources/containerd/client.ts';
import { podSandboxes } from '../../src/sources/containerd/pod-sandboxes.ts';
import {
  CRI_NAMESPACE,
  type CriContainerd,
  criBinDir,
  criSkip,
  removeCachedResults,
  startCriContainerd,
  writeBridgePrimary,
} from '../helpers/cri.ts';
import { bridgeName, deleteLink } from '../helpers/netns.ts';
import { removeDir, tempDir } from '../helpers/processes.ts';

const skip = criSkip();

const NETWORK = 'wrn-cri-sandboxes';
const SUBNET = '10.252.31.0/24';

describe("a pod's sandbox and its network namespace, from containerd's CRI", { skip }, () => {
  const dataRoot = tempDir('warren-crisb-hl-');
  const confDir = tempDir('warren-crisb-netd-');
  const bridge = bridgeName();
  let containerd: CriContainerd;
  let client: ContainerdClient | undefined;

  before(async () => {
    containerd = await startCriContainerd({ binDir: criBinDir(), confDir });
    writeBridgePrimary(confDir, { network: NETWORK, bridge, subnet: SUBNET, dataDir: dataRoot });
    client = new ContainerdClient(containerd.socket);
  });
  after(async () => {
    client?.close();
    removeCachedResults(NETWORK);
    await containerd?.stop();
    await deleteLink(bridge);
    for (const dir of [dataRoot, confDir]) removeDir(dir);
  });

  it('lists each sandbox with its pod and the namespace its network lives in, and not once it is removed', async () => {
    const uid = 'b6c1d9e2-31aa-4f0e-9d2c-0c0ffee00031';
    const otherUid = 'b6c1d9e2-31aa-4f0e-9d2c-0c0ffee00099';
    const id = await containerd.cri.runPodSandbox({ name: 'sbx-a', uid, namespace: 'warren-crisb' });
    const other = await containerd.cri.runPodSandbox({ name: 'sbx-b', uid: otherUid, namespace: 'warren-crisb' });
    const found = await podSandboxes(client as ContainerdClient, CRI_NAMESPACE);
    assert.deepEqual(
      found.map((s) => `${s.id} ${s.podUID}`).sort(),
      [`${id} ${uid}`, `${other} ${otherUid}`].sort(),
      'each sandbox with its pod',
    );
    const netns = found.find((s) => s.id === id)?.netns ?? '';
    assert.match(netns, /^\/var\/run\/netns\/cni-/);
    assert.ok(existsSync(netns), `${netns} is the namespace the sandbox lives in`);
    const status = await containerd.cri.podSandboxStatus(id, { verbose: true });
    assert.ok(JSON.stringify(status.info).includes(netns), 'the namespace CRI reports for the sandbox');

    await containerd.cri.stopPodSandbox(id);
    await containerd.cri.removePodSandbox(id);
    const left = await podSandboxes(client as ContainerdClient, CRI_NAMESPACE);
    assert.deepEqual(
      left.map((s) => s.id),
      [other],
    );
    await containerd.cri.stopPodSandbox(other);
    await containerd.cri.removePodSandbox(other);
  });
});

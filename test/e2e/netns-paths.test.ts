/**
 * The agent's default netns directories against real namespaces and the real `bridge` plugin: a
 * namespace recorded as podman records it (/run/netns/NAME) and one recorded as containerd's CRI
 * records it (/var/run/netns/NAME) are both observable, and when either is deleted without a DEL,
 * the reconcile sweep releases its address. Needs root and /usr/lib/cni/bridge.
 */
import assert from 'node:assert/strict';
import { existsSync, lstatSync, readlinkSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { AuditReport } from '../../src/api/protocol.ts';
import { requestJson } from '../../src/core/unix-http.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { haveReferencePlugins, reference, resultAddresses } from '../helpers/cni.ts';
import { addressesIn, bridgeName, createNetns, deleteLink, deleteNetns } from '../helpers/netns.ts';
import { isRoot, waitFor } from '../helpers/processes.ts';

/** /var/run and /run are one directory here (as on nearly every host): the case this is about. */
const varRunIsRun =
  existsSync('/var/run') &&
  lstatSync('/var/run').isSymbolicLink() &&
  ['/run', '../run'].includes(readlinkSync('/var/run'));
const skip =
  !isRoot() || !haveReferencePlugins()
    ? 'needs root and containernetworking-plugins'
    : !varRunIsRun
      ? '/var/run is not a link to /run here'
      : false;

describe('netns paths under the default --netns-dirs', { skip }, () => {
  let agent: AgentHandle;
  const bridge = bridgeName();
  const namespaces: string[] = [];

  const netconf = () => ({
    cniVersion: '1.0.0',
    name: 'nspaths',
    type: 'bridge',
    bridge,
    isGateway: false,
    ipMasq: false,
    ipam: { type: 'warren', socket: agent.socket, journal_dir: `${agent.dir}/journal`, range: '10.227.0.0/24' },
  });

  before(async () => {
    // No --netns-dirs: the default is what is under test.
    agent = await startAgent({ defaultNetnsDirs: true, args: ['--netns-grace', '0', '--reconcile-interval', '0.2'] });
  });
  after(async () => {
    await agent?.stop();
    for (const ns of namespaces) await deleteNetns(ns);
    await deleteLink(bridge);
  });

  const audit = async (): Promise<AuditReport> =>
    (await requestJson({ socket: agent.socket, method: 'POST', path: '/v1/audit', body: { fix: false } }))
      .body as AuditReport;

  for (const [who, spelling] of [
    ['podman', '/run/netns'],
    ["containerd's CRI", '/var/run/netns'],
  ] as const) {
    it(`releases the address of a container whose namespace, recorded as ${spelling}/NAME (${who}), is deleted without a DEL (issue 10)`, async () => {
      const ns = await createNetns();
      namespaces.push(ns.name);
      const netnsPath = `${spelling}/${ns.name}`;
      const containerID = `ctr-${who.replace(/\W/g, '')}`;
      const add = await reference('bridge', {
        command: 'ADD',
        containerID,
        netns: netnsPath,
        ifname: 'eth0',
        config: netconf(),
      });
      assert.equal(add.code, 0, add.stdout + add.stderr);
      const [address] = resultAddresses(add);
      assert.deepEqual(await addressesIn(ns.name, 'eth0'), [`${address}/24`]);
      assert.deepEqual(
        (await agent.allocations(`?containerID=${containerID}`)).map((a) => a.netns),
        [netnsPath],
      );

      // Observable while it exists: healthy because the namespace is seen, not suspect.
      const live = (await audit()).findings.find((f) => f.allocation.containerID === containerID);
      assert.deepEqual(live?.verdict, { kind: 'healthy', reason: `network namespace ${netnsPath} exists` });
      assert.ok(
        (await audit()).sources.netns.every((d) => d.observable),
        JSON.stringify((await audit()).sources.netns),
      );

      // The container goes away without a DEL: only the namespace's absence can tell.
      await deleteNetns(ns.name);
      await waitFor(`the sweep to release ${address}`, async () =>
        (await agent.allocations(`?containerID=${containerID}`)).length === 0 ? true : undefined,
      );
      // The log line follows the commit, and comes through a pipe: wait for it too.
      const line = await waitFor('the sweep to say why', () =>
        agent
          .log()
          .split('\n')
          .find((l) => l.includes('released: network namespace is gone') && l.includes(containerID)),
      );
      assert.ok(line.includes(netnsPath), line);
    });
  }
});

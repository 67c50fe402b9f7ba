/**
 * What the release pipeline logs names the source the way metrics do (sourceOf): a release an
 * adapter asked for is not logged as containerd's.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { ReleaseLog } from '../../../src/agent/release/log.ts';
import type { ReleaseIntent } from '../../../src/agent/release/intent.ts';
import type { Allocation } from '../../../src/ipam/allocation.ts';
import { flush } from '../../helpers/event-loop.ts';

function capture(): { log: ReleaseLog; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n'))
        if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: new ReleaseLog(pino({ level: 'info' }, sink)), lines };
}

const released: Allocation = {
  pool: 'p',
  address: '10.0.0.2',
  network: 'net',
  containerID: 'c1',
  ifname: 'eth0',
  node: 'n',
  createdAt: 1,
};
const PODMAN = { adapter: 'podman', netnsPrefixes: ['/run/netns/netns-'] };

describe('release log', () => {
  it("never logs a release an adapter asked for as containerd's", async () => {
    const { log, lines } = capture();
    const viaAdapter: ReleaseIntent = {
      kind: 'container-deleted',
      containerID: 'c1',
      observedAt: { wall: 1 },
      via: PODMAN,
    };
    log.released(viaAdapter, [released], 'container deleted');
    log.exited(
      { kind: 'task-exited', containerID: 'c2', event: 'task-exit', observedAt: { wall: 1 }, via: PODMAN },
      '/run/netns/netns-x',
    );
    log.failed(viaAdapter, 1, 'store busy', 1_000);
    log.released(
      { kind: 'container-deleted', containerID: 'c3', observedAt: { wall: 1 } },
      [released],
      'container deleted',
    );
    await flush();
    assert.deepEqual(
      lines.map((l) => [l.containerID, l.source, l.adapter]),
      [
        ['c1', 'plugin', 'podman'],
        ['c2', 'plugin', 'podman'],
        ['c1', 'plugin', 'podman'],
        ['c3', 'containerd', undefined],
      ],
    );
  });
});

/**
 * The soak reads what the agent logs of a release as the agent writes it: the lines here come from
 * the agent's own ReleaseLog (src/agent/release/log.ts) through pino, so a change of their words or
 * fields fails here before the soak's auditor reads every release as unexplained. Also: a line is
 * taken once, by its container before its address, and a line split across chunks is read whole.
 */
import assert from 'node:assert/strict';
import { PassThrough, Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { Allocation } from '../../src/ipam/allocation.ts';
import { ReleaseLog } from '../../src/agent/release/log.ts';
import { AgentReleaseLog, releaseOf, releasesCounted } from './agent-log.ts';

const owner = { network: 'soak', containerID: 'p1s1', ifname: 'eth0' };
const moment = { wall: 0 };

function allocation(containerID: string, address: string): Allocation {
  return { pool: 'p', address, network: 'soak', containerID, ifname: 'eth0', node: 'n', createdAt: 0 };
}

/** The JSON lines ReleaseLog writes for `log`'s calls. */
function linesOf(log: (release: ReleaseLog) => void): unknown[] {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  log(new ReleaseLog(pino({ level: 'info' }, sink)));
  return lines.map((l) => JSON.parse(l) as unknown);
}

describe("the soak's reading of the agents' release lines", () => {
  it('reads the source and the container or addresses of every release line the agent writes', () => {
    const lines = linesOf((log) => {
      log.released(
        { kind: 'journal-del', file: 'f', owner, recordedAt: moment },
        [allocation('p1s1', '10.0.0.1')],
        'x',
      );
      log.released({ kind: 'journal-del', file: 'g', owner, recordedAt: moment }, [], 'x');
      log.released(
        { kind: 'netns-gone', owner, netns: '/n/p1s1', createdAt: moment },
        [allocation('p1s1', '10.0.0.2')],
        'x',
      );
      log.released(
        { kind: 'container-deleted', containerID: 'p2s2', observedAt: moment },
        [allocation('p2s2', '10.0.0.3')],
        'gone',
      );
      log.released(
        {
          kind: 'pod-gone',
          pod: { uid: 'uid-3', namespace: 'soak', name: 'pod-3' },
          because: 'deleted',
          goneAt: moment,
          releaseAfter: moment,
        },
        [allocation('p3s3', '10.0.0.4')],
        'gone',
      );
    });
    assert.deepEqual(lines.map(releaseOf), [
      { source: 'journal', addresses: ['10.0.0.1'] },
      undefined, // released nothing: explains nothing
      { source: 'netns', containerID: 'p1s1', addresses: ['10.0.0.2'] },
      { source: 'containerd', containerID: 'p2s2', addresses: ['10.0.0.3'] },
      { source: 'kubernetes', addresses: ['10.0.0.4'] },
    ]);
  });

  it('takes a line once, by its container before its address, within the window asked', () => {
    const log = new AgentReleaseLog();
    log.read(1, JSON.stringify({ msg: 'missed delete released', released: ['10.0.0.1'] }), 100);
    log.read(1, JSON.stringify({ msg: 'released', source: 'netns', containerID: 'b', addresses: ['10.0.0.1'] }), 200);
    assert.equal(log.take('a', '10.0.0.1', 300, 400), undefined, 'read before the window');
    assert.equal(log.take('b', '10.0.0.1', 0, 400)?.arrivedAt, 200, 'its own container first');
    assert.equal(log.take('c', '10.0.0.1', 0, 400)?.source, 'journal');
    assert.equal(log.take('c', '10.0.0.1', 0, 400), undefined, 'each line explains one release');
    // The pod source's line names every address of the pod, no container: it explains each once.
    log.read(1, JSON.stringify({ msg: 'released', source: 'kubernetes', addresses: ['10.0.0.5', '10.0.0.6'] }), 300);
    assert.equal(log.take('d', '10.0.0.6', 0, 400)?.source, 'kubernetes');
    assert.equal(log.take('e', '10.0.0.5', 0, 400)?.source, 'kubernetes', "the other sandbox's release");
    assert.equal(log.take('f', '10.0.0.5', 0, 400), undefined);
  });

  it("reads a backlog and a stream's lines split across chunks, and the metrics address", async () => {
    const log = new AgentReleaseLog();
    const stream = new PassThrough();
    const line = JSON.stringify({
      msg: 'released: network namespace is gone',
      containerID: 'a',
      addresses: ['10.0.0.9'],
    });
    const served = JSON.stringify({ msg: 'metrics and dashboard served', address: '127.0.0.1:4000' });
    log.follow(2, `${served}\nnot json\n${line.slice(0, 10)}`, 50, stream);
    stream.write(line.slice(10));
    stream.end('\n');
    await new Promise((resolve) => stream.once('end', resolve));
    assert.equal(log.metricsAddress(2), '127.0.0.1:4000');
    assert.deepEqual(log.take('a', undefined, 0, Date.now() + 1_000)?.addresses, ['10.0.0.9']);
  });

  it('sums warren_releases_total over its sources', () => {
    const exposition = [
      '# HELP warren_releases_total Addresses released',
      '# TYPE warren_releases_total counter',
      'warren_releases_total{source="cni-del"} 3',
      'warren_releases_total{source="netns"} 2',
      'warren_release_retries_total{source="netns"} 9',
    ].join('\n');
    assert.equal(releasesCounted(exposition), 5);
  });
});

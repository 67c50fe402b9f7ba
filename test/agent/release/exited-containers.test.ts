/**
 * The containers whose task exited while their namespace was still there (release/
 * exited-containers.ts), on a manual clock: a recheck speaks for the latest exit seen, so it never
 * releases what the container ID was given after that exit; `since` stays the first; each is
 * shown under the runtime that said it exited.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ExitedContainers } from '../../../src/agent/release/exited-containers.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { momentOf } from '../../../src/core/moment.ts';

describe('ExitedContainers', () => {
  it('rechecks an exit seen twice as of the later one, and keeps when it was first seen waiting', () => {
    const clock = new ManualClock(Date.parse('2030-01-01T00:00:00Z'));
    const exited = new ExitedContainers(clock);
    const first = momentOf(clock);
    assert.equal(
      exited.wait({ kind: 'task-exited', containerID: 'c', event: 'task-exit', observedAt: first }, '/run/netns/a'),
      true,
    );
    clock.advance(5_000);
    const later = momentOf(clock);
    // A recheck queued before the second exit comes back with the first exit's moment: the later one stands.
    assert.equal(
      exited.wait({ kind: 'task-exited', containerID: 'c', event: 'task-exit', observedAt: later }, '/run/netns/a'),
      false,
    );
    assert.equal(
      exited.wait({ kind: 'namespace-recheck', containerID: 'c', observedAt: first }, '/run/netns/a'),
      false,
    );
    assert.deepEqual(exited.rechecks(), [{ kind: 'namespace-recheck', containerID: 'c', observedAt: later }]);
    assert.deepEqual(exited.status(), [
      { containerID: 'c', since: '2030-01-01T00:00:00.000Z', waitingFor: '/run/netns/a' },
    ]);
    exited.forget('c');
    assert.equal(exited.size, 0);
    assert.deepEqual(exited.rechecks(), []);
  });

  it("shows a container under the runtime that said it exited: an adapter's apart from containerd's", () => {
    const clock = new ManualClock(Date.parse('2030-01-01T00:00:00Z'));
    const exited = new ExitedContainers(clock);
    const via = { adapter: 'podman', netnsPrefixes: ['/run/netns/netns-'] };
    exited.wait(
      { kind: 'task-exited', containerID: 'p', event: 'task-exit', observedAt: momentOf(clock), via },
      '/run/netns/netns-p',
    );
    exited.wait(
      { kind: 'task-exited', containerID: 'd', event: 'task-exit', observedAt: momentOf(clock) },
      '/run/netns/cni-d',
    );
    assert.deepEqual(
      exited.status().map((e) => e.containerID),
      ['d'],
    );
    assert.deepEqual(
      exited.status('podman').map((e) => e.containerID),
      ['p'],
    );
    assert.deepEqual(
      exited.rechecks().find((i) => i.kind === 'namespace-recheck' && i.containerID === 'p'),
      {
        kind: 'namespace-recheck',
        containerID: 'p',
        observedAt: momentOf(clock),
        via,
      },
    );
  });
});

/**
 * The podman feed. First against a fake podman (a shell script that records its arguments and
 * prints prepared lines), with the manual clock: how a follower is restarted (backoff, `--since`),
 * what becomes of bad lines and throwing listeners, how close() stops a follower and its children,
 * and what list() makes of podman ps. Then against Debian's podman 4.3 itself: create, exit and
 * removal come as created, exited and deleted; list() is exactly the containers' full IDs; a
 * follower killed mid-way loses nothing. Waits are polls with deadlines; nothing sleeps.
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { RuntimeEvent } from '../../../../src/api/plugins/wire.ts';
import { ExponentialBackoff } from '../../../../src/core/backoff.ts';
import { ManualClock, systemClock } from '../../../../src/core/clock.ts';
import { isWarrenError } from '../../../../src/core/errors.ts';
import { PodmanFeed, sinceArgument } from '../../../../src/cli/adapters/podman/podman-feed.ts';
import { parsePsOutput } from '../../../../src/cli/adapters/podman/podman-list.ts';
import { BUSYBOX_IMAGE, startPodman } from '../../../helpers/podman.ts';
import { isGone, tempDir, waitFor } from '../../../helpers/processes.ts';
import { silentLogger } from '../../../helpers/logger.ts';

const A = 'c4eaaf63d6ba1ccca7157dd63b58eccf573e508adeb912649a011591278d5e44';
const B = '0e74ac942810a4584d1826470fd92432e84cc1c0bea98d81e5cfd0340cdbb51f';
const T0 = Date.UTC(2026, 10, 22, 13, 0, 0);

function line(id: string, status: string, time: number): string {
  return JSON.stringify({
    ID: id,
    Image: 'localhost/warren/busybox:latest',
    Name: 'x',
    Status: status,
    Time: new Date(time).toISOString(),
    Type: 'container',
    Attributes: {},
  });
}

/**
 * A fake podman. `events`: invocation n records its arguments (args.n) and PID (pid.n), prints
 * out.n, then exits 3 — unless stay.n exists (it waits on a child sleep, child.n) or
 * ignore-term.n (it ignores SIGTERM from the start, and becomes a sleep). `ps`: prints ps.out and ps.err, exits
 * with ps.code, or hangs if ps.hang exists.
 */
function fakePodman(): {
  bin: string;
  dir: string;
  env: NodeJS.ProcessEnv;
  write: (name: string, text: string) => void;
  read: (name: string) => string;
} {
  const dir = tempDir('warren-fake-podman-');
  const bin = join(dir, 'podman');
  writeFileSync(
    bin,
    `#!/bin/sh
d="$FAKE_PODMAN_DIR"
case "$1" in
ps)
  [ -e "$d/ps.hang" ] && exec sleep 1000
  [ -e "$d/ps.out" ] && cat "$d/ps.out"
  [ -e "$d/ps.err" ] && cat "$d/ps.err" >&2
  exit "$(cat "$d/ps.code" 2>/dev/null || echo 0)" ;;
events)
  n=$(( $(cat "$d/count" 2>/dev/null || echo 0) + 1 ))
  echo "$n" > "$d/count"
  printf '%s\\n' "$*" > "$d/args.$n"
  echo $$ > "$d/pid.$n"
  [ -e "$d/ignore-term.$n" ] && trap '' TERM
  [ -e "$d/out.$n" ] && cat "$d/out.$n"
  [ -e "$d/ignore-term.$n" ] && exec sleep 1000
  if [ -e "$d/stay.$n" ]; then sleep 1000 & echo $! > "$d/child.$n"; wait; fi
  exit 3 ;;
esac
exit 9
`,
  );
  chmodSync(bin, 0o755);
  return {
    bin,
    dir,
    env: { PATH: process.env.PATH, FAKE_PODMAN_DIR: dir },
    write: (name, text) => writeFileSync(join(dir, name), text),
    read: (name) => (existsSync(join(dir, name)) ? readFileSync(join(dir, name), 'utf8').trim() : ''),
  };
}

function fakeFeed(
  fake: ReturnType<typeof fakePodman>,
  clock: ManualClock,
  over: { listTimeoutMs?: number } = {},
): PodmanFeed {
  return new PodmanFeed({
    podman: fake.bin,
    env: fake.env,
    logger: silentLogger,
    clock,
    backoff: new ExponentialBackoff({ initialMs: 500, maxMs: 4_000 }),
    ...over,
  });
}

describe('following a fake podman', () => {
  it('delivers events, starting --since start(), and restarts an exited follower with backoff, --since its last line less a second', async (t) => {
    const fake = fakePodman();
    const clock = new ManualClock(T0);
    const feed = fakeFeed(fake, clock);
    t.after(() => feed.close());
    const got: RuntimeEvent[] = [];
    feed.subscribe((e) => got.push(e));
    const t1 = T0 + 5_000;
    fake.write('out.1', `${line(A, 'create', t1)}\n${line(A, 'start', t1 + 10)}\n`);
    fake.write('stay.3', '');
    feed.start();
    feed.start(); // idempotent
    await waitFor('the first event', () => (got.length === 1 ? true : undefined));
    assert.deepEqual(got, [{ id: A, kind: 'created', time: t1 }]);
    assert.equal(fake.read('args.1'), `events --format json --filter type=container --since ${sinceArgument(T0)}`);
    await waitFor('the restart to be scheduled', () => (clock.pendingTimers === 1 ? true : undefined));

    // It read lines, so it was healthy: the first delay.
    clock.advance(499);
    assert.equal(feed.counts.followers, 1);
    clock.advance(1);
    assert.equal(feed.counts.followers, 2);
    await waitFor('the second follower', () => fake.read('args.2') || undefined);
    assert.equal(
      fake.read('args.2'),
      `events --format json --filter type=container --since ${sinceArgument(t1 + 10 - 1_000)}`,
    );

    // The second read nothing and exited: the delay doubles.
    await waitFor('the second restart to be scheduled', () => (clock.pendingTimers === 1 ? true : undefined));
    clock.advance(999);
    assert.equal(feed.counts.followers, 2);
    clock.advance(1);
    assert.equal(feed.counts.followers, 3);
    await waitFor('the third follower to stay', () => fake.read('child.3') || undefined);
    assert.deepEqual(feed.counts, { followers: 3, events: 1, ignored: 1, malformed: 0 });
  });

  it('skips malformed and over-long lines, drops ignored ones, and a throwing listener does not stop the others', async (t) => {
    const fake = fakePodman();
    const clock = new ManualClock(T0);
    const feed = fakeFeed(fake, clock);
    t.after(() => feed.close());
    const got: RuntimeEvent[] = [];
    feed.subscribe(() => {
      throw new Error('a broken listener');
    });
    feed.subscribe((e) => got.push(e));
    const off = feed.subscribe(() => assert.fail('unsubscribed'));
    off();
    fake.write(
      'out.1',
      [
        'garbage',
        `{"Name":"localhost/warren/busybox:latest","Status":"pull","Time":"2026-11-22T13:58:14.253998275Z","Type":"image","Attributes":null}`,
        JSON.stringify({ ID: 'short', Status: 'remove', Time: '2026-11-22T13:58:14Z', Type: 'container' }),
        'x'.repeat(1_100_000),
        line(A, 'died', T0 + 1),
        '',
        line(B, 'remove', T0 + 2),
        '{"partial',
      ].join('\n'),
    );
    fake.write('stay.1', '');
    feed.start();
    await waitFor('both events', () => (got.length === 2 ? true : undefined));
    assert.deepEqual(got, [
      { id: A, kind: 'exited', time: T0 + 1 },
      { id: B, kind: 'deleted', time: T0 + 2 },
    ]);
    assert.deepEqual(feed.counts, { followers: 1, events: 2, ignored: 1, malformed: 3 });
  });

  it('close() stops the follower and the processes it started, and nothing restarts after', async () => {
    const fake = fakePodman();
    const clock = new ManualClock(T0);
    const feed = fakeFeed(fake, clock);
    fake.write('stay.1', '');
    feed.start();
    const child = Number(await waitFor('the follower', () => fake.read('child.1') || undefined));
    const pid = Number(fake.read('pid.1'));
    assert.equal(feed.followerPid, pid);
    await feed.close();
    await waitFor('the follower and its child to be gone', () => (isGone(pid) && isGone(child) ? true : undefined));
    assert.equal(clock.pendingTimers, 0);
    clock.advance(60_000);
    assert.equal(feed.counts.followers, 1);
    feed.start();
    assert.equal(feed.counts.followers, 1, 'no start after close');
  });

  it('close() kills a follower that ignores SIGTERM once the grace has passed on the clock', async () => {
    const fake = fakePodman();
    const clock = new ManualClock(T0);
    const feed = fakeFeed(fake, clock);
    fake.write('ignore-term.1', '');
    fake.write('out.1', `${line(A, 'create', T0 + 1)}\n`);
    const got: RuntimeEvent[] = [];
    feed.subscribe((e) => got.push(e));
    feed.start();
    // The line comes after the trap is set; wait for the exec'd sleep, which inherits it.
    await waitFor('the follower to run', () => (got.length === 1 ? true : undefined));
    const pid = Number(fake.read('pid.1'));
    const ignoresTerm = (): boolean => {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const sigIgn = BigInt(`0x${/^SigIgn:\s*([0-9a-f]+)$/m.exec(status)?.[1] ?? '0'}`);
      return /^Name:\s*sleep$/m.test(status) && (sigIgn & (1n << 14n)) !== 0n;
    };
    await waitFor('the follower to be a sleep that ignores SIGTERM', () => (ignoresTerm() ? true : undefined));
    let closed = false;
    const closing = feed.close().then(() => {
      closed = true;
    });
    await waitFor('the kill grace to be set', () => (clock.pendingTimers === 1 ? true : undefined));
    assert.equal(closed, false);
    assert.equal(isGone(pid), false);
    clock.advance(2_000);
    await closing;
    assert.ok(isGone(pid));
  });

  it('a podman binary that does not exist is retried with growing delays', async (t) => {
    const clock = new ManualClock(T0);
    const feed = new PodmanFeed({
      podman: join(tempDir('warren-no-podman-'), 'podman'),
      logger: silentLogger,
      clock,
      backoff: new ExponentialBackoff({ initialMs: 500, maxMs: 4_000 }),
    });
    t.after(() => feed.close());
    feed.start();
    for (const delay of [500, 1_000, 2_000, 4_000, 4_000]) {
      const before = feed.counts.followers;
      await waitFor('a restart to be scheduled', () => (clock.pendingTimers === 1 ? true : undefined));
      clock.advance(delay - 1);
      assert.equal(feed.counts.followers, before);
      clock.advance(1);
      assert.equal(feed.counts.followers, before + 1);
    }
    await assert.rejects(feed.list(), (e: unknown) => isWarrenError(e, 'IO_FAILURE'));
  });
});

describe('listing with a fake podman', () => {
  it('answers the full IDs podman ps lists', async () => {
    const fake = fakePodman();
    fake.write(
      'ps.out',
      JSON.stringify([
        { Id: A, Names: ['a'], State: 'running' },
        { Id: B, Names: ['b'], State: 'exited' },
      ]),
    );
    assert.deepEqual(await fakeFeed(fake, new ManualClock(T0)).list(), [A, B]);
    fake.write('ps.out', '[]\n');
    assert.deepEqual(await fakeFeed(fake, new ManualClock(T0)).list(), []);
  });

  it('refuses a whole listing with an entry it cannot read, rather than answer part of it', async () => {
    const fake = fakePodman();
    fake.write('ps.out', JSON.stringify([{ Id: A }, { Id: B.slice(0, 12) }]));
    await assert.rejects(
      fakeFeed(fake, new ManualClock(T0)).list(),
      (e: unknown) => isWarrenError(e, 'IO_FAILURE') && /entry 1 has no full container ID/.test(e.message),
    );
  });

  it('fails with podman’s message when podman ps fails', async () => {
    const fake = fakePodman();
    fake.write('ps.err', 'Error: database is locked');
    fake.write('ps.code', '125');
    await assert.rejects(
      fakeFeed(fake, new ManualClock(T0)).list(),
      (e: unknown) => isWarrenError(e, 'IO_FAILURE') && /\(125\): Error: database is locked/.test(e.message),
    );
  });

  it('gives up on a podman ps that does not answer within the timeout on the clock', async () => {
    const fake = fakePodman();
    fake.write('ps.hang', '');
    const clock = new ManualClock(T0);
    const listing = fakeFeed(fake, clock, { listTimeoutMs: 5_000 }).list();
    await waitFor('the timeout to be set', () => (clock.pendingTimers === 1 ? true : undefined));
    clock.advance(5_000);
    await assert.rejects(
      listing,
      (e: unknown) => isWarrenError(e, 'IO_FAILURE') && /did not answer within 5000 ms/.test(e.message),
    );
  });

  it('parsePsOutput reads blank output as no containers and refuses what is not a list', () => {
    assert.deepEqual(parsePsOutput(''), []);
    assert.match(String(parsePsOutput('{}')), /not a list/);
    assert.match(String(parsePsOutput('[')), /not JSON/);
    assert.match(String(parsePsOutput('[null]')), /entry 0/);
  });
});

describe('with real podman', () => {
  it('create, exit and removal come as created, exited and deleted; list() is exactly the containers', async (t) => {
    const podman = await startPodman();
    const feed = new PodmanFeed({ podman: podman.bin, env: podman.env, logger: silentLogger, clock: systemClock });
    t.after(async () => {
      await feed.close();
      await podman.close();
    });
    const got: RuntimeEvent[] = [];
    feed.subscribe((e) => got.push(e));
    feed.start();
    const waitEvent = (id: string, kind: RuntimeEvent['kind']): Promise<RuntimeEvent> =>
      waitFor(`${kind} for ${id}`, () => got.find((e) => e.id === id && e.kind === kind));

    const started = Date.now();
    const a = await podman.ok(['create', '--network', 'none', '--name', 'wrp-feed-a', BUSYBOX_IMAGE, 'true']);
    const created = await waitEvent(a, 'created');
    assert.ok(created.time >= started - 1_000 && created.time <= Date.now() + 1_000, 'the event carries podman’s time');
    assert.equal(created.netns, undefined);

    const b = await podman.ok([
      'run',
      '-d',
      '--network',
      'none',
      '--name',
      'wrp-feed-b',
      BUSYBOX_IMAGE,
      'sleep',
      '1000',
    ]);
    await waitEvent(b, 'created');
    assert.deepEqual([...(await feed.list())].sort(), [a, b].sort());

    await podman.ok(['start', a]);
    await waitEvent(a, 'exited');
    await podman.ok(['rm', a]);
    await waitEvent(a, 'deleted');
    assert.deepEqual(await feed.list(), [b]);
    assert.deepEqual(
      got.filter((e) => e.id === a).map((e) => e.kind),
      ['created', 'exited', 'deleted'],
    );

    await podman.rm(b);
    await waitEvent(b, 'deleted');
    assert.deepEqual(await feed.list(), []);
  });

  it('a follower killed while containers come and go is restarted and misses nothing', async (t) => {
    const podman = await startPodman();
    const feed = new PodmanFeed({
      podman: podman.bin,
      env: podman.env,
      logger: silentLogger,
      clock: systemClock,
      backoff: new ExponentialBackoff({ initialMs: 200, maxMs: 1_000 }),
    });
    t.after(async () => {
      await feed.close();
      await podman.close();
    });
    const got: RuntimeEvent[] = [];
    feed.subscribe((e) => got.push(e));
    feed.start();
    const a = await podman.ok(['create', '--network', 'none', BUSYBOX_IMAGE, 'true']);
    await waitFor('created', () => got.find((e) => e.id === a && e.kind === 'created'));
    const pid = feed.followerPid;
    assert.ok(pid !== undefined);
    process.kill(pid, 'SIGKILL');
    await waitFor('the follower to be gone', () => (isGone(pid) ? true : undefined));
    await podman.ok(['rm', a]);
    await waitFor('deleted, read by the next follower', () => got.find((e) => e.id === a && e.kind === 'deleted'));
    assert.ok(feed.counts.followers >= 2);
  });
});

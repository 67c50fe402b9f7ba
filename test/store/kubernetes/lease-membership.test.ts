/**
 * Membership on Leases (src/store/kubernetes/lease-membership.ts) through the fake API server: an
 * agent's restart takes its own announcement over at once on the same boot, waits out its previous
 * start's on another boot while it runs (a clone may hold it), then takes it over once that start
 * does not answer a ping; a live twin answers and is not taken over; an instance taken over halts;
 * the Lease is written as the API server demands (MicroTime, holder, duration, the record).
 *
 * Issue 36 (liveness on demand): a lapsed Lease no longer proves its holder gone, so the tests whose
 * holder must be gone close its tier (a crash: its watch, which answers pings, stops), and the clock
 * is moved while an announcement pings (`driven`).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { ManualClock } from '../../../src/core/clock.ts';
import { isWarrenError } from '../../../src/core/errors.ts';
import { type KubeTier, openKubeTier } from '../../../src/store/kubernetes/tier.ts';
import { nodeLeaseName } from '../../../src/store/kubernetes/names.ts';
import { type FakeKubeApi, startFakeKubeApi } from '../../helpers/fake-kube-api.ts';
import { waitFor } from '../../helpers/processes.ts';

const NAMESPACE = 'warren-system';
const LEASE_SECONDS = 20;
/** How long a pinged agent has to answer. */
const PING_SECONDS = 2;
/** When a renewal writes: a third of the lease after the last write. */
const RENEWAL_MS = (LEASE_SECONDS * 1000) / 3;

describe('Lease membership', () => {
  let fake: FakeKubeApi;
  const clock = new ManualClock(Date.now());
  const opened: KubeTier[] = [];
  const tier = async (notice?: (message: string) => void): Promise<KubeTier> => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(fake.kubeconfigPath);
    const t = await openKubeTier({
      kubeConfig,
      namespace: NAMESPACE,
      leaseSeconds: LEASE_SECONDS,
      pingSeconds: PING_SECONDS,
      clock,
      ...(notice === undefined ? {} : { notice }),
    });
    opened.push(t);
    return t;
  };
  const info = (instance: string, bootId: string, previous?: string) => ({
    since: clock.now(),
    version: 'test',
    instance,
    bootId,
    host: 'h',
    pid: 1,
    ...(previous === undefined ? {} : { previous }),
  });

  /** `work` settled, the clock moved 250 ms at a time meanwhile (a ping's wait, a wait-out). */
  const driven = async <T>(work: Promise<T>): Promise<T> => {
    let settled = false;
    const done = work.finally(() => {
      settled = true;
    });
    done.catch(() => undefined);
    await waitFor('the work to settle with the clock moving', () => {
      if (settled) return true;
      clock.advance(250);
      return undefined;
    });
    return done;
  };

  before(async () => {
    fake = await startFakeKubeApi({ crds: 'deploy' });
  });
  after(async () => {
    for (const t of opened) await t.close();
    await fake.stop();
  });

  it('writes the announcement as a Lease: holder, duration, MicroTime, labels and the record', async () => {
    const t = await tier();
    await t.membership.announce('lease-shape', info('i-shape', 'boot-a'));
    const lease = fake.object('leases', nodeLeaseName('lease-shape'), NAMESPACE);
    assert.ok(lease);
    const spec = lease.spec as Record<string, unknown>;
    assert.equal(spec.holderIdentity, 'i-shape');
    assert.equal(spec.leaseDurationSeconds, LEASE_SECONDS);
    assert.match(String(spec.renewTime), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    assert.equal(lease.metadata.labels?.['warren.dev/lease'], 'node');
    const record = JSON.parse(String(lease.metadata.annotations?.['warren.dev/record']));
    assert.equal(record.node, 'lease-shape');
    assert.equal(record.bootId, 'boot-a');
    const before = spec.renewTime;
    // A renewal writes once a third of the lease has passed, while the node holds a chore (issue 36).
    assert.equal(await t.membership.claimTask('lease-shape-chore'), true);
    clock.advance(RENEWAL_MS);
    await t.membership.renew();
    const renewed = fake.object('leases', nodeLeaseName('lease-shape'), NAMESPACE);
    assert.notEqual(
      (renewed?.spec as Record<string, unknown> | undefined)?.renewTime,
      before,
      'a renewal writes a new renewTime',
    );
    await t.membership.releaseTask('lease-shape-chore');
    await t.membership.withdraw();
    assert.equal(fake.object('leases', nodeLeaseName('lease-shape'), NAMESPACE), undefined);
  });

  it("takes over its previous start's announcement at once on the same boot; the old one halts", async () => {
    const [old, restarted] = [await tier(), await tier()];
    await old.membership.announce('lease-restart', info('p-1', 'boot-a'));
    await restarted.membership.announce('lease-restart', info('p-2', 'boot-a', 'p-1'));
    // The old one, idle, renews nothing: its watch of the Lease sees it taken.
    await waitFor('the old one halted', () => old.membership.halted());
    assert.match(old.membership.halted() ?? '', /taken over/);
    await assert.rejects(old.membership.releaseTask('forget-node/x'), (e) => isWarrenError(e, 'TRY_AGAIN'));
    assert.equal(await old.membership.claimTask('forget-node/x'), false, 'a halted agent takes no chore');
    await restarted.membership.withdraw();
  });

  it("waits out its previous start's announcement made on another boot, then takes it over", async () => {
    const notices: string[] = [];
    const [clone, rebooted] = [await tier(), await tier((m) => notices.push(m))];
    await clone.membership.announce('lease-reboot', info('q-1', 'boot-a'));
    await clone.close(); // gone with its boot: it answers no ping
    let settled = false;
    const announced = rebooted.membership.announce('lease-reboot', info('q-2', 'boot-b', 'q-1')).finally(() => {
      settled = true;
    });
    await waitFor('the wait to be announced', () => (notices.length > 0 ? true : undefined));
    assert.match(notices[0] ?? '', /previous start on another boot/);
    clock.advance(LEASE_SECONDS * 1000 + 500);
    // The wait reads the Lease every 250 ms of the clock: move it on until the announcement is made.
    await waitFor('the announcement after the lease lapsed', () => {
      clock.advance(250);
      return settled ? true : undefined;
    });
    await announced;
    const lease = fake.object('leases', nodeLeaseName('lease-reboot'), NAMESPACE);
    assert.equal((lease?.spec as Record<string, unknown> | undefined)?.holderIdentity, 'q-2');
    await rebooted.membership.withdraw();
  });

  /** A Node as the kubelet registers it, reporting `bootID` (or none). */
  const nodeReporting = (name: string, bootID?: string): void => {
    fake.createNode(name);
    if (bootID !== undefined) fake.updateNode(name, (n) => Object.assign(n, { status: { nodeInfo: { bootID } } }));
  };

  it("takes over at once its previous start's announcement from another boot when the Node reports this boot", async () => {
    const notices: string[] = [];
    const [crashed, rebooted] = [await tier(), await tier((m) => notices.push(m))];
    await crashed.membership.announce('lease-power-loss', info('r-1', 'boot-old'));
    nodeReporting('lease-power-loss', 'boot-new'); // the kubelet of the machine, booted again, reported it
    const started = clock.monotonic();
    await rebooted.membership.announce('lease-power-loss', info('r-2', 'boot-new', 'r-1'));
    assert.equal(clock.monotonic(), started, 'no wait: the clock was not moved and the announcement is made');
    const lease = fake.object('leases', nodeLeaseName('lease-power-loss'), NAMESPACE);
    assert.equal((lease?.spec as Record<string, unknown> | undefined)?.holderIdentity, 'r-2');
    assert.ok(!notices.some((m) => /waiting up to/.test(m)), 'nothing waited out');
    assert.match(notices.join('\n'), /reports this machine's boot/);
    await rebooted.membership.withdraw();
  });

  /** This machine's start of an agent as its record says: this boot, this pid namespace, `pid`. */
  const here = (instance: string, pid: number, previous?: string) => ({
    ...info(instance, 'boot-here', previous),
    pid,
    pidNamespace: readlinkSync('/proc/self/ns/pid'),
  });
  /** A pid that ran and has exited (reaped): no process has it now. */
  const exitedPid = (): number =>
    Number(
      spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout,
    );

  it('takes over at once an announcement made on this boot by a process gone, which its file put back does not record', async () => {
    const notices: string[] = [];
    const [killed, putBack] = [await tier(), await tier((m) => notices.push(m))];
    // The file put back records an older start (g-1); the Lease names the start killed since (g-2).
    await killed.membership.announce('lease-put-back', here('g-2', exitedPid(), 'g-1'));
    await killed.close(); // killed: no withdrawal
    const started = clock.monotonic();
    await putBack.membership.announce('lease-put-back', here('g-3', process.pid, 'g-1'));
    assert.equal(clock.monotonic(), started, 'no wait: the clock was not moved and the announcement is made');
    const lease = fake.object('leases', nodeLeaseName('lease-put-back'), NAMESPACE);
    assert.equal((lease?.spec as Record<string, unknown> | undefined)?.holderIdentity, 'g-3');
    assert.match(notices.join('\n'), /made on this machine and boot by a process that no longer runs/);
    await putBack.membership.withdraw();
  });

  it('refuses one made on this boot by a process that still runs, as any live twin', async () => {
    const [live, second] = [await tier(), await tier()];
    await live.membership.announce('lease-live-here', here('l-1', process.ppid));
    await assert.rejects(second.membership.announce('lease-live-here', here('l-2', process.pid)), (e) => {
      assert.ok(isWarrenError(e, 'ALREADY_RUNNING'));
      assert.match(e.message, /agent instance l-1/);
      return true;
    });
    await live.membership.withdraw();
  });

  for (const [title, bootID] of [
    ['another boot ID', 'boot-of-a-clone'],
    ['no Node', undefined],
  ] as const) {
    it(`waits out its previous start's announcement from another boot when Kubernetes shows ${title}`, async () => {
      const node = `lease-wait-${bootID === undefined ? 'none' : 'clone'}`;
      const notices: string[] = [];
      const [clone, restarted] = [await tier(), await tier((m) => notices.push(m))];
      await clone.membership.announce(node, info('w-1', 'boot-a'));
      await clone.close(); // gone: it answers no ping
      if (bootID !== undefined) nodeReporting(node, bootID);
      let settled = false;
      const announced = restarted.membership.announce(node, info('w-2', 'boot-b', 'w-1')).finally(() => {
        settled = true;
      });
      await waitFor('the wait to be announced', () => (notices.length > 0 ? true : undefined));
      assert.match(notices[0] ?? '', /waiting up to/);
      clock.advance(LEASE_SECONDS * 500);
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(settled, false, 'still waiting half a lease later');
      clock.advance(LEASE_SECONDS * 500 + 500);
      await waitFor('the announcement after the lease lapsed', () => {
        clock.advance(250);
        return settled ? true : undefined;
      });
      await announced;
      const lease = fake.object('leases', nodeLeaseName(node), NAMESPACE);
      assert.equal((lease?.spec as Record<string, unknown> | undefined)?.holderIdentity, 'w-2');
      await restarted.membership.withdraw();
    });
  }

  it('refuses a second agent with the node name, again once the Lease lapsed while the first answers its ping', async () => {
    const [first, second] = [await tier(), await tier()];
    await first.membership.announce('lease-twin', info('t-1', 'boot-a'));
    await assert.rejects(second.membership.announce('lease-twin', info('t-2', 'boot-z')), (e) => {
      assert.ok(isWarrenError(e, 'ALREADY_RUNNING'));
      assert.match(e.message, /agent instance t-1/);
      return true;
    });
    assert.match(second.membership.halted() ?? '', /already announced/, 'the refused one does not write either');
    clock.advance(LEASE_SECONDS * 1000 + 1000);
    // Issue 36: the first, idle, let its Lease lapse; before, the second took it over here. Now the
    // first answers the second's ping, and the second is refused again.
    await assert.rejects(driven(second.membership.accept()), (e) => {
      assert.ok(isWarrenError(e, 'ALREADY_RUNNING'));
      assert.match(e.message, /answered a ping/);
      return true;
    });
    assert.equal(first.membership.halted(), undefined, 'the first serves on');
    const lease = fake.object('leases', nodeLeaseName('lease-twin'), NAMESPACE);
    assert.equal((lease?.spec as Record<string, unknown> | undefined)?.holderIdentity, 't-1');
    assert.match(String(lease?.metadata.annotations?.['warren.dev/pong']), /^lease-twin\/t-2\//, 'its answer');
    await first.membership.withdraw();
  });

  it('takes over a twin that does not answer its ping within the ping time, not before', async () => {
    const notices: string[] = [];
    const [first, second] = [await tier(), await tier((m) => notices.push(m))];
    await first.membership.announce('lease-dead-twin', info('d-1', 'boot-a'));
    await first.close(); // killed: no withdrawal, no answer
    clock.advance(LEASE_SECONDS * 1000 + 1000);
    const started = clock.monotonic();
    await driven(second.membership.announce('lease-dead-twin', info('d-2', 'boot-z')));
    assert.ok(clock.monotonic() - started >= PING_SECONDS * 1000, 'the ping time was waited out');
    const lease = fake.object('leases', nodeLeaseName('lease-dead-twin'), NAMESPACE);
    assert.equal((lease?.spec as Record<string, unknown> | undefined)?.holderIdentity, 'd-2');
    assert.match(notices.join('\n'), /did not answer a ping/);
    assert.equal(second.membership.halted(), undefined);
    await second.membership.withdraw();
  });
  it('pings the holder of a Lease renewed later than this clock says it is (stepped back), and takes it over only unanswered', async () => {
    // Found by the soak: an agent whose node's wall clock went back a day (NTP) could not start for a
    // day, its Lease looking renewed within its lease on the stepped clock.
    const [live, dead, second] = [await tier(), await tier(), await tier()];
    await live.membership.announce('lease-stepped-live', info('l-1', 'boot-a'));
    await dead.membership.announce('lease-stepped-dead', info('s-1', 'boot-a'));
    await dead.close(); // killed: no withdrawal, no answer
    clock.stepWall(-3_600_000);
    try {
      await driven(second.membership.announce('lease-stepped-dead', info('s-2', 'boot-z')));
      const lease = fake.object('leases', nodeLeaseName('lease-stepped-dead'), NAMESPACE);
      assert.equal((lease?.spec as Record<string, unknown> | undefined)?.holderIdentity, 's-2');
      assert.equal(second.membership.halted(), undefined);
      await second.membership.withdraw();
      const twin = await tier();
      await assert.rejects(driven(twin.membership.announce('lease-stepped-live', info('l-2', 'boot-z'))), (e) => {
        assert.ok(isWarrenError(e, 'ALREADY_RUNNING'));
        assert.match(e.message, /agent instance l-1 .*, which answered a ping/);
        return true;
      });
      assert.equal(live.membership.halted(), undefined, 'the live one serves on');
      await live.membership.withdraw();
    } finally {
      clock.stepWall(3_600_000);
    }
  });

  it('an agent that announces late (the API server away at its start) pings a Lease renewed within its lease and takes it over unanswered, instead of stopping for an operator', async () => {
    // Found by the soak (kubernetes, seed 3838): a start with its state directory put back, while the
    // API server was away, then a Lease its killed predecessor had renewed a second before.
    const [killed, late] = [await tier(), await tier()];
    await killed.membership.announce('lease-late', info('k-1', 'boot-a'));
    await killed.close(); // kill -9: its Lease runs for LEASE_SECONDS more, unanswered
    await fake.setUnavailable(true, '503');
    try {
      await assert.rejects(late.membership.announce('lease-late', info('k-2', 'boot-z')));
    } finally {
      await fake.setUnavailable(false);
    }
    const started = clock.monotonic();
    // The agent's upkeep announces again (agent/cluster/upkeep.ts); a renewal would claim it alike.
    await driven(late.membership.announce('lease-late', info('k-2', 'boot-z')));
    assert.ok(clock.monotonic() - started >= PING_SECONDS * 1000, 'after the ping time');
    assert.ok(clock.monotonic() - started < LEASE_SECONDS * 1000, 'not after the Lease lapsed');
    assert.equal(late.membership.halted(), undefined, 'allocating: no operator needed');
    const lease = fake.object('leases', nodeLeaseName('lease-late'), NAMESPACE);
    assert.equal((lease?.spec as Record<string, unknown> | undefined)?.holderIdentity, 'k-2');
    await late.membership.withdraw();
  });

  it('an agent that announces late is still refused by a live twin, which answers its ping', async () => {
    const [live, late] = [await tier(), await tier()];
    await live.membership.announce('lease-late-twin', info('w-1', 'boot-a'));
    await fake.setUnavailable(true, '503');
    try {
      await assert.rejects(late.membership.announce('lease-late-twin', info('w-2', 'boot-z')));
    } finally {
      await fake.setUnavailable(false);
    }
    await assert.rejects(driven(late.membership.announce('lease-late-twin', info('w-2', 'boot-z'))), (e) => {
      assert.ok(isWarrenError(e, 'ALREADY_RUNNING'));
      assert.match(e.message, /agent instance w-1 .*, which answered a ping/);
      return true;
    });
    assert.match(late.membership.halted() ?? '', /already announced/, 'the late one stops allocating');
    assert.equal(live.membership.halted(), undefined, 'the live one serves on');
    await live.membership.withdraw();
  });
});

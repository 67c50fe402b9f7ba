/**
 * Taking host-local's range over and handing it back (agent/node/host-local-takeover.ts), against a
 * real data dir in a temp directory, a real SQLite store and allocator, on a manual clock: ADD
 * waits until the reservations are imported; a reservation host-local made late is imported at the
 * next rescan, and so is one the store refused; a conflict is reported, never overwritten; hostile
 * files are skipped without blocking; handBack writes host-local's format for every address held
 * and removes what Warren no longer holds; a release after the hand-back takes its reservation with
 * it. And the codec of host-local's files (cni/host-local-reservation.ts).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { HostLocalTakeover, type HostLocalTarget } from '../../../src/agent/node/host-local-takeover.ts';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { parseNetConf } from '../../../src/cni/netconf.ts';
import { parseReservation, renderReservation, reservationAddress } from '../../../src/cni/host-local-reservation.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';
import type { CommitResult, LedgerOp } from '../../../src/store/store.ts';
import { removeDir, tempDir, waitFor } from '../../helpers/processes.ts';
import { silentLogger } from '../../helpers/logger.ts';

const NETWORK = 'hlnet';

interface Rig {
  readonly dir: string;
  readonly clock: ManualClock;
  readonly store: SqliteStore;
  readonly allocator: Allocator;
  readonly takeover: HostLocalTakeover;
  readonly target: HostLocalTarget;
  reserve(address: string, containerID: string, ifname?: string): void;
  holder(address: string): Promise<string | undefined>;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

/** A store whose commits fail while `failing` is set: the fault a real disk or etcd can give. */
class FlakyStore extends SqliteStore {
  failing = false;
  override async commit(pool: string, expected: number, ops: readonly LedgerOp[]): Promise<CommitResult> {
    if (this.failing) throw new Error('disk I/O error (injected)');
    return super.commit(pool, expected, ops);
  }
}

function rig(): Rig & { readonly store: FlakyStore } {
  const root = tempDir('warren-hltakeover-');
  const dir = join(root, NETWORK);
  mkdirSync(dir);
  const clock = new ManualClock(Date.parse('2026-11-26T10:00:00Z'));
  const store = new FlakyStore({ path: ':memory:', clock });
  const allocator = new Allocator({ store, clock, node: 'n1' });
  const abort = new AbortController();
  const takeover = new HostLocalTakeover({
    allocator,
    store,
    node: 'n1',
    clock,
    logger: silentLogger,
    rescanMs: 5_000,
  });
  takeover.start(abort.signal);
  const ranges = parseNetConf(
    {
      cniVersion: '1.0.0',
      name: NETWORK,
      type: 'bridge',
      ipam: { type: 'warren', range: '10.77.0.0/24', gateway: '10.77.0.1' },
    },
    'ADD',
  ).ipam.ranges;
  cleanups.push(async () => {
    abort.abort();
    await store.close();
    removeDir(root);
  });
  return {
    dir,
    clock,
    store,
    allocator,
    takeover,
    target: { network: NETWORK, dataDir: dir, ranges },
    reserve: (address, containerID, ifname = 'eth0') =>
      writeFileSync(join(dir, address), renderReservation(containerID, ifname)),
    holder: async (address) => (await store.list({ address }))[0]?.containerID,
  };
}

const imported = (r: Rig) =>
  waitFor('the import', () => (r.takeover.status()[0]?.imported === true ? r.takeover.status()[0] : undefined));

describe("taking host-local's range over", () => {
  it('refuses ADD of the network until its reservations are imported, then never hands one out', async () => {
    const r = rig();
    r.reserve('10.77.0.2', 'hl-a');
    r.reserve('10.77.0.3', 'hl-b', 'net1');
    writeFileSync(join(r.dir, 'last_reserved_ip.0'), '10.77.0.3');
    writeFileSync(join(r.dir, 'lock'), '');
    assert.equal(r.takeover.gate(NETWORK), undefined, 'nothing adopted: nothing to wait for');
    r.takeover.adopt(r.target);
    assert.match(
      r.takeover.gate(NETWORK) ?? '',
      /network hlnet is being taken over from host-local; its reservations in .* are not imported yet/,
    );
    assert.equal(r.takeover.gate('othernet'), undefined);
    await imported(r);
    assert.equal(r.takeover.gate(NETWORK), undefined);
    assert.equal(await r.holder('10.77.0.2'), 'hl-a');
    assert.deepEqual(
      (await r.store.list({ address: '10.77.0.3' })).map((a) => [a.containerID, a.ifname, a.network]),
      [['hl-b', 'net1', NETWORK]],
    );
    const given: string[] = [];
    for (let i = 0; i < 5; i++) {
      const [a] = await r.allocator.allocate({
        owner: { network: NETWORK, containerID: `w${i}`, ifname: 'eth0' },
        ranges: r.target.ranges,
      });
      given.push(a?.allocation.address as string);
    }
    assert.ok(!given.includes('10.77.0.2') && !given.includes('10.77.0.3'), given.join(' '));
    // Adopting the same target again (every pass) changes nothing.
    r.takeover.adopt(r.target);
    assert.equal(r.takeover.gate(NETWORK), undefined);
  });

  it('with a fresh config, keeps ADD waiting one interval, so a reservation host-local makes meanwhile (an ADD begun with the primary) is imported first', async () => {
    const r = rig();
    r.reserve('10.77.0.2', 'hl-a');
    r.takeover.adopt(r.target, true);
    await waitFor('the first pass', async () => ((await r.holder('10.77.0.2')) === 'hl-a' ? true : undefined));
    assert.match(r.takeover.gate(NETWORK) ?? '', /not imported yet/, 'the first pass does not open the gate');
    r.reserve('10.77.0.3', 'in-flight'); // the runtime's ADD that began before it loaded Warren's config
    r.clock.advance(5_000);
    await imported(r);
    assert.equal(await r.holder('10.77.0.3'), 'in-flight', 'imported before any ADD was served');
    assert.equal(r.takeover.gate(NETWORK), undefined);
  });

  it('imports a reservation host-local made after the takeover at the next rescan', async () => {
    const r = rig();
    r.takeover.adopt(r.target);
    await imported(r);
    r.reserve('10.77.0.9', 'late');
    r.clock.advance(5_000);
    await waitFor('the late reservation', async () => ((await r.holder('10.77.0.9')) === 'late' ? true : undefined));
  });

  it('tries an import the store refused again at the next pass', async () => {
    const r = rig();
    r.reserve('10.77.0.7', 'refused-once');
    r.store.failing = true;
    r.takeover.adopt(r.target);
    const s = await imported(r);
    assert.match(
      (s.problems ?? []).join('\n'),
      /10\.77\.0\.7 for refused-once \(eth0\) could not be imported: disk I\/O/,
    );
    assert.equal(await r.holder('10.77.0.7'), undefined);
    r.store.failing = false;
    r.clock.advance(5_000);
    const holds = async () => ((await r.holder('10.77.0.7')) === 'refused-once' ? true : undefined);
    await waitFor('the retried import', holds);
  });

  it('no longer reports an import the store refused once a later pass imported it', async () => {
    const r = rig();
    r.reserve('10.77.0.8', 'refused-then-imported');
    r.store.failing = true;
    r.takeover.adopt(r.target);
    const s = await imported(r);
    assert.match((s.problems ?? []).join('\n'), /10\.77\.0\.8 for refused-then-imported .*could not be imported/);
    r.store.failing = false;
    r.clock.advance(5_000);
    const holds = async () => ((await r.holder('10.77.0.8')) === 'refused-then-imported' ? true : undefined);
    await waitFor('the retried import', holds);
    const cleared = () => (r.takeover.status()[0]?.problems === undefined ? true : undefined);
    await waitFor('the refused import gone from the problems', cleared);
    assert.equal(r.takeover.status()[0]?.problems, undefined);
  });

  it('reports an address host-local reserved that Warren holds for another container, and leaves both as they are', async () => {
    const r = rig();
    await r.allocator.allocate({
      owner: { network: NETWORK, containerID: 'warren-one', ifname: 'eth0' },
      ranges: r.target.ranges,
      requested: [{ family: 4, value: (10n << 24n) + (77n << 16n) + 5n }],
    });
    r.reserve('10.77.0.5', 'host-local-one');
    r.takeover.adopt(r.target);
    const s = await imported(r);
    assert.match(
      (s.problems ?? []).join('\n'),
      /host-local reserved 10\.77\.0\.5 for host-local-one \(eth0\), but Warren holds it for warren-one \(eth0\)/,
    );
    assert.equal(await r.holder('10.77.0.5'), 'warren-one');
    assert.equal(
      parseReservation(readFileSync(join(r.dir, '10.77.0.5'), 'utf8')).ok &&
        readFileSync(join(r.dir, '10.77.0.5'), 'utf8'),
      'host-local-one\r\neth0',
    );
  });

  it('skips a FIFO, a link, an oversized file and a forged owner without blocking, and says which', async () => {
    const r = rig();
    execFileSync('mkfifo', [join(r.dir, '10.77.0.20')]);
    symlinkSync('/dev/zero', join(r.dir, '10.77.0.21'));
    writeFileSync(join(r.dir, '10.77.0.22'), 'x'.repeat(4096));
    writeFileSync(join(r.dir, '10.77.0.23'), '../../etc\r\neth0');
    writeFileSync(join(r.dir, '10.77.0.24'), 'ok-one\r\n');
    r.reserve('10.77.0.25', 'good');
    r.reserve('10.77.1.7', 'other-range'); // not Warren's range: left alone
    r.takeover.adopt(r.target);
    const s = await imported(r);
    const problems = (s.problems ?? []).join('\n');
    assert.match(problems, /10\.77\.0\.20 is a FIFO, not a regular file; skipped/);
    assert.match(problems, /10\.77\.0\.21 is a symbolic link, not a regular file; skipped/);
    assert.match(problems, /10\.77\.0\.22 is larger than 1024 bytes; skipped/);
    assert.match(problems, /10\.77\.0\.23: container ID "\.\.\/\.\.\/etc" is not a valid CNI container ID; skipped/);
    assert.match(problems, /10\.77\.0\.24: interface name "" is not a valid CNI interface name; skipped/);
    assert.equal(await r.holder('10.77.0.25'), 'good');
    assert.equal(await r.holder('10.77.1.7'), undefined);
  });

  it('hands back: a reservation for every address held (one host-local made last imported first, never removed), stale ones removed, and a later release takes its file with it', async () => {
    const r = rig();
    r.reserve('10.77.0.2', 'hl-a');
    r.reserve('10.77.0.3', 'hl-gone');
    r.takeover.adopt(r.target);
    await imported(r);
    const [w] = await r.allocator.allocate({
      owner: { network: NETWORK, containerID: 'w1', ifname: 'eth0' },
      ranges: r.target.ranges,
    });
    const mine = w?.allocation.address as string;
    await r.allocator.release({ network: NETWORK, containerID: 'hl-gone', ifname: 'eth0' }); // its pod went while Warren served
    r.reserve('10.77.0.9', 'late-hl'); // made since the last rescan: imported by the hand-back, not removed
    const [report] = await r.takeover.handBack('handed back for the test');
    assert.deepEqual(
      { ...report, problems: [...(report?.problems ?? [])] },
      { network: NETWORK, dataDir: r.dir, written: 1, kept: 2, removed: 1, problems: [] },
    );
    assert.equal(r.takeover.gate(NETWORK), 'handed back for the test');
    assert.equal(r.takeover.gate('othernet'), 'handed back for the test', 'every ADD is refused');
    assert.deepEqual(
      readdirSync(r.dir)
        .filter((n) => n.startsWith('10.'))
        .sort(),
      ['10.77.0.2', '10.77.0.9', mine].sort(),
    );
    assert.equal(readFileSync(join(r.dir, mine), 'utf8'), 'w1\r\neth0');
    // A DEL still reaching Warren: the release removes host-local's reservation of the same owner.
    r.takeover.released(await r.allocator.release({ network: NETWORK, containerID: 'w1', ifname: 'eth0' }));
    assert.equal(existsSync(join(r.dir, mine)), false);
    // One naming another owner stays.
    r.reserve(mine, 'someone-else');
    r.takeover.released([
      { pool: 'x', address: mine, network: NETWORK, containerID: 'w1', ifname: 'eth0', node: 'n1', createdAt: 0 },
    ]);
    assert.ok(existsSync(join(r.dir, mine)));
  });
});

describe("host-local's reservation files", () => {
  it("reads host-local's format and its older one, and refuses what names no valid owner", () => {
    assert.deepEqual(parseReservation('abc123\r\neth0'), {
      ok: true,
      containerID: 'abc123',
      ifname: 'eth0',
      legacy: false,
    });
    assert.deepEqual(parseReservation(' abc123 '), { ok: true, containerID: 'abc123', ifname: 'eth0', legacy: true });
    assert.equal(parseReservation('').ok, false);
    assert.equal(parseReservation('a/b\r\neth0').ok, false);
    assert.equal(parseReservation('abc\r\nname-far-too-long-for-linux').ok, false);
    assert.equal(renderReservation('abc', 'net1'), 'abc\r\nnet1');
  });

  it('takes only address names for reservations', () => {
    assert.deepEqual(reservationAddress('10.0.0.5'), { family: 4, value: 0x0a000005n });
    assert.equal(reservationAddress('fd00::5')?.family, 6);
    for (const name of ['lock', 'last_reserved_ip.0', '.tmp', 'README', '10.0.0.300'])
      assert.equal(reservationAddress(name), undefined, name);
  });
});

/**
 * The CNI config manager against a real conf dir and real kernel events: it finds the primary the
 * way the runtime does, derives Warren's file, regenerates on every kind of change (written in
 * place, renamed over, removed, replaced by another primary), keeps the last good file when the
 * primary breaks or goes, never wraps its own output, honours the readiness indicator and never
 * leaves a torn file. The primary's wait bound runs on a manual clock; kernel events are awaited
 * with a deadline, never slept for.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  statSync,
  symlinkSync,
  unlinkSync,
  watch,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { CniConfigManager, type CniConfigManagerOptions } from '../../../src/agent/node/cni-config-manager.ts';
import type { CniConfigStatus } from '../../../src/api/status.ts';
import { ManualClock } from '../../../src/core/clock.ts';
import { parseNetConf } from '../../../src/cni/netconf.ts';
import { HANG_BOUND_MS, removeDir, tempDir } from '../../helpers/processes.ts';
import { silentLogger } from '../../helpers/logger.ts';

/** Bounds a hang; a loaded machine is slow, not wrong. */
const DEADLINE_MS = HANG_BOUND_MS;
const OUTPUT = '00-warren.conflist';

function bridgeConflist(subnet: string, name = 'podnet', extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name,
    plugins: [
      {
        type: 'bridge',
        bridge: 'cni0',
        isGateway: true,
        ipMasq: true,
        ipam: { type: 'host-local', subnet, dataDir: '/var/lib/cni/networks', routes: [{ dst: '0.0.0.0/0' }] },
        ...extra,
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  });
}

interface Rig {
  readonly dir: string;
  readonly clock: ManualClock;
  manager: CniConfigManager;
  /** Starts a manager (again) on the same dir. */
  start(overrides?: Partial<CniConfigManagerOptions>): CniConfigManager;
  /** Stops the running manager and waits for its watches to end. */
  stop(): Promise<void>;
  until(what: string, done: (s: CniConfigStatus) => boolean): Promise<CniConfigStatus>;
  output(): Record<string, unknown> | undefined;
}

const rigs: Rig[] = [];
afterEach(async () => {
  for (const rig of rigs.splice(0)) {
    await rig.stop();
    removeDir(rig.dir);
  }
});

function rig(defaults: Partial<CniConfigManagerOptions> = {}): Rig {
  const dir = tempDir('warren-cniconf-');
  const clock = new ManualClock(Date.parse('2026-11-22T10:00:00Z'));
  let abort: AbortController | undefined;
  const r: Rig = {
    dir,
    clock,
    manager: undefined as unknown as CniConfigManager,
    start(overrides = {}) {
      abort = new AbortController();
      r.manager = new CniConfigManager({
        confDir: dir,
        primaryWaitMs: 60_000,
        cniVersionMax: '1.0.0',
        cleanupOnExit: false,
        clock,
        logger: silentLogger,
        ...defaults,
        ...overrides,
      });
      r.manager.start(abort.signal);
      return r.manager;
    },
    async stop() {
      abort?.abort();
      abort = undefined;
      await r.manager?.stopped();
    },
    async until(what, done) {
      const deadline = AbortSignal.timeout(DEADLINE_MS);
      try {
        return await r.manager.whenPassed(done, deadline);
      } catch {
        throw new Error(`timed out waiting for ${what}; status: ${JSON.stringify(r.manager.status())}`);
      }
    },
    output() {
      const path = join(dir, OUTPUT);
      return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>) : undefined;
    },
  };
  rigs.push(r);
  return r;
}

/** The subnet Warren's file hands out from (its main plugin's first range). */
function subnetOf(conf: Record<string, unknown> | undefined): string | undefined {
  const plugins = conf?.plugins as Array<{ ipam?: { ipRanges?: Array<{ range: string }> } }> | undefined;
  return plugins?.[0]?.ipam?.ipRanges?.[0]?.range;
}

describe('the CNI config manager', () => {
  it("writes 00-warren.conflist from the primary: mode 0600, no temp file left, the main plugin's IPAM taken over and the rest of the chain untouched", async () => {
    const r = rig();
    writeFileSync(join(r.dir, '10-bridge.conflist'), bridgeConflist('10.240.1.0/24'));
    r.start();
    const s = await r.until('the first write', (x) => x.state === 'current');
    const out = r.output();
    assert.equal(statSync(join(r.dir, OUTPUT)).mode & 0o777, 0o600);
    assert.deepEqual(readdirSync(r.dir).sort(), [OUTPUT, '10-bridge.conflist'], 'no temp file is left behind');
    const plugins = out?.plugins as Array<Record<string, unknown>>;
    assert.deepEqual(plugins[0]?.ipam, {
      type: 'warren',
      ipRanges: [{ range: '10.240.1.0/24', gateway: '10.240.1.1' }],
      routes: [{ dst: '0.0.0.0/0' }],
    });
    assert.deepEqual(plugins[1], { type: 'portmap', capabilities: { portMappings: true } });
    assert.equal(out?.name, 'podnet');
    // The runtime hands the main plugin the list's name and version: the agent's ADD parser takes it.
    parseNetConf({ ...plugins[0], name: out?.name, cniVersion: out?.cniVersion }, 'ADD');
    assert.equal(s.primary, join(r.dir, '10-bridge.conflist'));
    assert.equal(s.network, 'podnet');
    assert.equal(s.writes, 1);
    assert.equal(s.lastWrite?.from, join(r.dir, '10-bridge.conflist'));
    assert.ok(
      s.notes?.some((n) => n.includes('dataDir')),
      'the dropped dataDir is noted',
    );
  });

  it('regenerates when the primary is rewritten in place, renamed over, or replaced by an earlier-sorting primary', async () => {
    const r = rig();
    const primary = join(r.dir, '10-bridge.conflist');
    writeFileSync(primary, bridgeConflist('10.240.2.0/24'));
    r.start();
    await r.until('the first write', (s) => s.state === 'current');
    writeFileSync(primary, bridgeConflist('10.240.3.0/24'));
    await r.until('the rewrite in place', () => subnetOf(r.output()) === '10.240.3.0/24');
    writeFileSync(join(r.dir, '.10-bridge.tmp'), bridgeConflist('10.240.4.0/24'));
    renameSync(join(r.dir, '.10-bridge.tmp'), primary);
    await r.until('the rename over the primary', () => subnetOf(r.output()) === '10.240.4.0/24');
    writeFileSync(join(r.dir, '05-first.conflist'), bridgeConflist('10.240.5.0/24', 'firstnet'));
    const s = await r.until('the earlier primary', () => subnetOf(r.output()) === '10.240.5.0/24');
    assert.equal(s.primary, join(r.dir, '05-first.conflist'));
    assert.equal(r.output()?.name, 'firstnet');
    assert.equal(s.writes, 4);
  });

  it('keeps the last good file when the primary is removed or broken, reports why, and regenerates when a good primary takes its place', async () => {
    const r = rig();
    const primary = join(r.dir, '10-bridge.conflist');
    writeFileSync(primary, bridgeConflist('10.240.6.0/24'));
    r.start();
    await r.until('the first write', (s) => s.state === 'current');
    const good = readFileSync(join(r.dir, OUTPUT), 'utf8');

    writeFileSync(primary, '{"cniVersion": "1.0.0", "name": ');
    let s = await r.until('the broken primary', (x) => x.state === 'stale');
    assert.match(s.problem ?? '', /10-bridge\.conflist: is not valid JSON .*keeping the last good config/);
    assert.equal(readFileSync(join(r.dir, OUTPUT), 'utf8'), good, 'the last good file stays');

    unlinkSync(primary);
    s = await r.until('the vanished primary', (x) => (x.problem ?? '').includes('no CNI config'));
    assert.equal(s.state, 'stale');
    assert.equal(readFileSync(join(r.dir, OUTPUT), 'utf8'), good);

    writeFileSync(join(r.dir, '20-other.conflist'), bridgeConflist('10.240.7.0/24', 'othernet'));
    s = await r.until('the new primary', (x) => x.state === 'current');
    assert.equal(s.primary, join(r.dir, '20-other.conflist'));
    assert.equal(subnetOf(r.output()), '10.240.7.0/24');
  });

  it('refuses a primary without an IPAM section, or with an IPAM it cannot translate, and writes nothing', async () => {
    const r = rig();
    writeFileSync(
      join(r.dir, '10-calico.conflist'),
      JSON.stringify({
        cniVersion: '1.0.0',
        name: 'k8s-pod-network',
        plugins: [{ type: 'calico', ipam: { type: 'calico-ipam' } }],
      }),
    );
    r.start();
    let s = await r.until('the refusal', (x) => x.state === 'stale');
    assert.match(s.problem ?? '', /10-calico\.conflist: .*calico-ipam.*cannot be taken over.*nothing written/);
    assert.equal(existsSync(join(r.dir, OUTPUT)), false);
    writeFileSync(
      join(r.dir, '10-calico.conflist'),
      JSON.stringify({ cniVersion: '1.0.0', name: 'flat', plugins: [{ type: 'ptp' }, { type: 'portmap' }] }),
    );
    s = await r.until('the second refusal', (x) =>
      (x.problem ?? '').includes('no plugin of its chain has an IPAM section'),
    );
    assert.equal(existsSync(join(r.dir, OUTPUT)), false);
  });

  it('never takes its own output for a primary, across many restarts and with an old output left under another name', async () => {
    const r = rig();
    writeFileSync(join(r.dir, '10-bridge.conflist'), bridgeConflist('10.240.8.0/24'));
    for (let i = 0; i < 6; i++) {
      r.start();
      const s = await r.until(`start ${i}`, (x) => x.state === 'current');
      assert.equal(s.primary, join(r.dir, '10-bridge.conflist'), `start ${i}`);
      if (i === 2) copyFileSync(join(r.dir, OUTPUT), join(r.dir, '01-left-over.conflist'));
      await r.stop();
    }
    unlinkSync(join(r.dir, '10-bridge.conflist'));
    r.start();
    const s = await r.until('no primary', (x) => x.state === 'stale');
    assert.equal(s.primary, undefined, 'neither Warren file is taken for a primary');
    const out = r.output();
    assert.equal((out as { 'warren.generated': { from: string } })['warren.generated'].from, '10-bridge.conflist');
  });

  it('leaves alone a file at its name that it did not write', async () => {
    const r = rig();
    const theirs = JSON.stringify({ cniVersion: '1.0.0', name: 'theirs', plugins: [{ type: 'bridge' }] });
    writeFileSync(join(r.dir, OUTPUT), theirs);
    writeFileSync(join(r.dir, '10-bridge.conflist'), bridgeConflist('10.240.9.0/24'));
    r.start({ cleanupOnExit: true });
    const s = await r.until('the refusal', (x) => x.state === 'stale');
    assert.match(s.problem ?? '', /was not written by Warren/);
    await r.stop();
    assert.equal(readFileSync(join(r.dir, OUTPUT), 'utf8'), theirs, 'neither overwritten nor cleaned up');
  });

  it('waits for a primary up to --primary-wait, then reports there is none, and still takes one that comes later', async () => {
    const r = rig();
    r.start({ primaryWaitMs: 30_000 });
    let s = await r.until('waiting', (x) => x.state === 'waiting');
    assert.match(s.problem ?? '', /waiting up to 30 s/);
    r.clock.advance(30_000);
    s = await r.until('the wait to end', (x) => x.state === 'stale');
    assert.match(s.problem ?? '', /after waiting 30 s; nothing written/);
    writeFileSync(join(r.dir, '10-bridge.conflist'), bridgeConflist('10.240.10.0/24'));
    await r.until('the late primary', (x) => x.state === 'current');
  });

  // Changed for issue 24: the file used to be removed while the indicator was missing, which let
  // the primary's host-local hand out Warren's addresses. Now it fails closed.
  it('never removes its file while the readiness indicator is missing: it stays first (written even before the indicator came), ADD waits with the reason', async () => {
    const indicatorDir = tempDir('warren-ready-');
    const indicator = join(indicatorDir, 'primary-ready');
    try {
      const r = rig({ readinessIndicator: indicator });
      writeFileSync(join(r.dir, '10-bridge.conflist'), bridgeConflist('10.240.11.0/24'));
      r.start();
      let s = await r.until('not ready', (x) => x.state === 'not-ready');
      assert.equal(s.problem, `not ready: readiness indicator ${indicator} is missing`);
      assert.equal(r.manager.notReady(), s.problem);
      assert.equal(subnetOf(r.output()), '10.240.11.0/24', "written and first, so the primary's IPAM is never asked");
      writeFileSync(indicator, '');
      s = await r.until('ready', (x) => x.state === 'current');
      assert.equal(r.manager.notReady(), undefined);
      assert.deepEqual(s.readinessIndicator, { path: indicator, present: true });
      unlinkSync(indicator);
      await r.until('not ready again', (x) => x.state === 'not-ready');
      assert.equal(subnetOf(r.output()), '10.240.11.0/24', 'still there');
      // Deleted by hand while not ready: put back, as at any other time.
      unlinkSync(join(r.dir, OUTPUT));
      await r.until('the file back while not ready', (x) => x.state === 'not-ready' && existsSync(join(r.dir, OUTPUT)));
      // Broken primary while not ready: the last good file stays, and both problems are said.
      writeFileSync(join(r.dir, '10-bridge.conflist'), 'not json');
      s = await r.until('both problems', (x) => (x.problem ?? '').includes('not valid JSON'));
      assert.equal(s.state, 'not-ready');
      assert.match(
        s.problem ?? '',
        /^not ready: readiness indicator .* is missing; 10-bridge\.conflist: is not valid JSON/,
      );
      assert.equal(subnetOf(r.output()), '10.240.11.0/24');
    } finally {
      removeDir(indicatorDir);
    }
  });

  it('follows a readiness indicator whose directory does not exist yet, through the periodic rescan', async () => {
    const parent = tempDir('warren-ready-');
    const indicator = join(parent, 'later', 'ready');
    try {
      const r = rig({ readinessIndicator: indicator, rescanMs: 5_000 });
      writeFileSync(join(r.dir, '10-bridge.conflist'), bridgeConflist('10.240.20.0/24'));
      r.start();
      await r.until('not ready', (x) => x.state === 'not-ready');
      mkdirSync(join(parent, 'later'));
      writeFileSync(indicator, '');
      // No watch could be placed on a directory that did not exist: the rescan finds it.
      r.clock.advance(5_000);
      await r.until('ready once the rescan saw the indicator', (x) => x.state === 'current');
    } finally {
      removeDir(parent);
    }
  });

  it('puts its file back when it is deleted by hand', async () => {
    const r = rig();
    writeFileSync(join(r.dir, '10-bridge.conflist'), bridgeConflist('10.240.12.0/24'));
    r.start();
    await r.until('the first write', (x) => x.state === 'current');
    unlinkSync(join(r.dir, OUTPUT));
    const s = await r.until('the file back', (x) => x.writes === 2);
    assert.equal(subnetOf(r.output()), '10.240.12.0/24');
    assert.equal(s.state, 'current');
  });

  // Changed for issue 24: a clean stop used to remove the file whatever Warren held, handing
  // Warren's addresses to the primary's IPAM. Now only a file naming nothing Warren holds goes.
  it('removes its file on a clean stop with --cleanup-config-on-exit only while Warren holds no address of its network, and keeps it without', async () => {
    const r = rig();
    writeFileSync(join(r.dir, '10-bridge.conflist'), bridgeConflist('10.240.13.0/24'));
    r.start();
    await r.until('the first write', (x) => x.state === 'current');
    await r.stop();
    assert.ok(existsSync(join(r.dir, OUTPUT)), 'kept by default');
    const asked: string[] = [];
    r.start({
      cleanupOnExit: true,
      holdsAddresses: async (network) => {
        asked.push(network);
        return true;
      },
    });
    await r.until('current again', (x) => x.state === 'current');
    await r.stop();
    assert.deepEqual(asked, ['podnet']);
    assert.ok(existsSync(join(r.dir, OUTPUT)), "kept: the primary's IPAM would hand out what Warren holds");
    r.start({ cleanupOnExit: true });
    await r.until('current again', (x) => x.state === 'current');
    await r.stop();
    assert.ok(existsSync(join(r.dir, OUTPUT)), 'kept when it cannot tell');
    r.start({ cleanupOnExit: true, holdsAddresses: async () => false });
    await r.until('current again', (x) => x.state === 'current');
    await r.stop();
    assert.equal(existsSync(join(r.dir, OUTPUT)), false, "removed: nothing of Warren's to hand out twice");
    assert.ok(existsSync(join(r.dir, '10-bridge.conflist')), 'the primary is never touched');
  });

  it('tells the takeover of a host-local primary before the file naming its range is written', async () => {
    const r = rig();
    writeFileSync(join(r.dir, '10-bridge.conflist'), bridgeConflist('10.240.21.0/24'));
    const adopted: Array<{ network: string; dataDir: string; ranges: string[]; fileThere: boolean; fresh: boolean }> =
      [];
    r.start({
      takeover: {
        adopt: (t, fresh) =>
          adopted.push({
            network: t.network,
            dataDir: t.dataDir,
            ranges: t.ranges.map((x) => x.subnet),
            fileThere: existsSync(join(r.dir, OUTPUT)),
            fresh,
          }),
        status: () => [],
      },
    });
    await r.until('the write', (x) => x.state === 'current');
    assert.deepEqual(adopted[0], {
      network: 'podnet',
      dataDir: '/var/lib/cni/networks/podnet',
      ranges: ['10.240.21.0/24'],
      fileThere: false,
      fresh: true,
    });
    // Started again over its own file: not fresh (the runtime has used Warren's config all along).
    await r.stop();
    r.start({
      takeover: {
        adopt: (t, fresh) =>
          adopted.push({ network: t.network, dataDir: t.dataDir, ranges: [], fileThere: true, fresh }),
        status: () => [],
      },
    });
    await r.until('current again', (x) => x.state === 'current');
    assert.equal(adopted.at(-1)?.fresh, false);
  });

  it('reports a FIFO and a link to /dev/zero named like configs without blocking or reading them, and serves on', async () => {
    const r = rig();
    execFileSync('mkfifo', [join(r.dir, '05-x.conf')]);
    symlinkSync('/dev/zero', join(r.dir, '06-zero.conf'));
    writeFileSync(join(r.dir, '10-bridge.conflist'), bridgeConflist('10.240.22.0/24'));
    r.start();
    let s = await r.until('the FIFO reported', (x) => x.state === 'stale');
    assert.match(s.problem ?? '', /05-x\.conf: cannot be read \(is a FIFO, not a regular file\)/);
    unlinkSync(join(r.dir, '05-x.conf'));
    s = await r.until('the link reported', (x) => (x.problem ?? '').includes('06-zero.conf'));
    assert.match(s.problem ?? '', /06-zero\.conf: cannot be read \(is a character device, not a regular file\)/);
    unlinkSync(join(r.dir, '06-zero.conf'));
    await r.until('the real primary', (x) => x.state === 'current');
  });

  it('reports a config that sorts before its own file, which the runtime would use instead', async () => {
    const r = rig();
    writeFileSync(join(r.dir, '00-aaa.conflist'), bridgeConflist('10.240.14.0/24'));
    r.start();
    const s = await r.until('the write', (x) => x.state === 'current');
    assert.equal(s.shadowedBy, '00-aaa.conflist');
  });

  it("counts a dot-file with a config extension, as libcni does: it is the primary, and it shadows Warren's file", async () => {
    const r = rig();
    writeFileSync(join(r.dir, '10-bridge.conflist'), bridgeConflist('10.240.18.0/24'));
    writeFileSync(join(r.dir, '.05-hidden.conflist'), bridgeConflist('10.240.19.0/24', 'hidden'));
    r.start();
    const s = await r.until('the write', (x) => x.state === 'current');
    assert.equal(s.primary, join(r.dir, '.05-hidden.conflist'));
    assert.equal(s.shadowedBy, '.05-hidden.conflist');
    unlinkSync(join(r.dir, '.05-hidden.conflist'));
    const after = await r.until('the next primary', (x) => x.network === 'podnet');
    assert.equal(after.shadowedBy, undefined);
  });

  it('derives from a primary named explicitly in another directory, and follows it there', async () => {
    const elsewhere = tempDir('warren-primary-');
    try {
      const primary = join(elsewhere, 'net.conf');
      const single = (subnet: string) =>
        JSON.stringify({
          cniVersion: '0.4.0',
          name: 'single',
          type: 'bridge',
          bridge: 'br9',
          ipam: { type: 'host-local', subnet },
        });
      writeFileSync(primary, single('10.240.15.0/24'));
      const r = rig({ primaryConfig: primary });
      writeFileSync(join(r.dir, '10-bridge.conflist'), bridgeConflist('10.240.16.0/24'));
      r.start();
      const s = await r.until('the write', (x) => x.state === 'current');
      assert.equal(s.primary, primary);
      assert.equal(r.output()?.cniVersion, '0.4.0');
      assert.equal(subnetOf(r.output()), '10.240.15.0/24');
      writeFileSync(primary, single('10.240.17.0/24'));
      await r.until('the rewrite', () => subnetOf(r.output()) === '10.240.17.0/24');
    } finally {
      removeDir(elsewhere);
    }
  });

  it('never shows a reader an empty, torn or invalid file, through 40 regenerations', async () => {
    const r = rig();
    const primary = join(r.dir, '10-bridge.conflist');
    writeFileSync(primary, bridgeConflist('10.241.0.0/24'));
    r.start();
    await r.until('the first write', (x) => x.state === 'current');
    const seen: string[] = [];
    const bad: string[] = [];
    const look = (): void => {
      let text: string;
      try {
        text = readFileSync(join(r.dir, OUTPUT), 'utf8');
      } catch {
        bad.push('missing');
        return;
      }
      seen.push(text);
      try {
        const conf = JSON.parse(text) as Record<string, unknown>;
        if (conf['warren.generated'] === undefined) bad.push(text);
      } catch {
        bad.push(text);
      }
    };
    const watcher = watch(r.dir, look);
    try {
      for (let i = 1; i <= 40; i++) {
        writeFileSync(primary, bridgeConflist(`10.241.${i}.0/24`));
        await r.until(`regeneration ${i}`, () => subnetOf(r.output()) === `10.241.${i}.0/24`);
        look();
      }
    } finally {
      watcher.close();
    }
    assert.deepEqual(bad, []);
    assert.ok(seen.length >= 40, `read ${seen.length} versions`);
  });
});

describe('the readiness indicator without a managed config', () => {
  it('is checked on its own: a missing file is a reason, a present one none', () => {
    const dir = tempDir('warren-ready-');
    try {
      mkdirSync(join(dir, 'sub'));
      const rigless = new CniConfigManager({
        confDir: dir,
        primaryWaitMs: 0,
        readinessIndicator: join(dir, 'sub', 'ready'),
        cniVersionMax: '1.0.0',
        cleanupOnExit: false,
        clock: new ManualClock(0),
        logger: silentLogger,
      });
      assert.match(rigless.notReady() ?? '', /readiness indicator .*sub\/ready is missing/);
      writeFileSync(join(dir, 'sub', 'ready'), '');
      assert.equal(rigless.notReady(), undefined);
    } finally {
      removeDir(dir);
    }
  });
});

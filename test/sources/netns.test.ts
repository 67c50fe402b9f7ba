/**
 * NetnsObserver judges a namespace gone only where it can really see: inside a configured
 * directory that is readable and a mount point. Mount points come from a fake mountinfo file
 * written per test, so a temporary directory counts as mounted or not at will.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NetnsObserver, mountPoints } from '../../src/sources/netns.ts';
import { tempDir } from '../helpers/processes.ts';

/** Escapes a path the way the kernel writes it in mountinfo. */
function escapeMountPoint(path: string): string {
  return path.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
}

/** A mountinfo file listing `/` and the given mount points, in the kernel's format. */
function fakeMountinfo(scratch: string, points: readonly string[]): string {
  const lines = ['22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw'];
  points.forEach((p, i) =>
    lines.push(
      `${100 + i} 22 0:${50 + i} / ${escapeMountPoint(p)} rw,nosuid,nodev shared:${10 + i} - tmpfs tmpfs rw,mode=755`,
    ),
  );
  const file = join(scratch, `mountinfo-${Math.random().toString(36).slice(2)}`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

interface Fixture {
  readonly root: string;
  /** A configured directory that is a mount point, holding `ns-present`. */
  readonly mounted: string;
  /** A configured directory that is not a mount point, holding `ns-present`. */
  readonly plain: string;
  /** A configured directory that does not exist. */
  readonly missing: string;
  readonly observer: NetnsObserver;
  readonly mountinfo: string;
}

function fixture(): Fixture {
  const root = realpathSync(tempDir('warren-netns-'));
  const mounted = join(root, 'mounted');
  const plain = join(root, 'plain');
  const missing = join(root, 'missing');
  for (const dir of [mounted, plain]) {
    mkdirSync(dir);
    writeFileSync(join(dir, 'ns-present'), '');
  }
  const mountinfo = fakeMountinfo(root, [mounted]);
  return {
    root,
    mounted,
    plain,
    missing,
    mountinfo,
    observer: new NetnsObserver([mounted, plain, missing], mountinfo),
  };
}

describe('mountPoints', () => {
  test('reads the mount point field of each line', () => {
    const root = tempDir('warren-netns-');
    const file = fakeMountinfo(root, ['/var/run/netns', '/run/user/0']);
    assert.deepEqual([...mountPoints(file)].sort(), ['/', '/run/user/0', '/var/run/netns']);
  });

  test('decodes octal escapes: \\040 space, \\011 tab, \\012 newline, \\134 backslash', () => {
    const root = tempDir('warren-netns-');
    const file = join(root, 'mountinfo');
    writeFileSync(
      file,
      [
        '36 35 98:0 / /mnt/with\\040space rw - ext3 /dev/root rw',
        '37 35 98:0 / /mnt/tab\\011and\\012newline rw - ext3 /dev/root rw',
        '38 35 98:0 / /mnt/back\\134slash rw - ext3 /dev/root rw',
        '',
      ].join('\n'),
    );
    assert.deepEqual([...mountPoints(file)].sort(), ['/mnt/back\\slash', '/mnt/tab\tand\nnewline', '/mnt/with space']);
  });

  test('a mountinfo file that cannot be read gives no mount points', () => {
    assert.equal(mountPoints(join(tempDir('warren-netns-'), 'absent')).size, 0);
  });

  test('blank and short lines are skipped', () => {
    const root = tempDir('warren-netns-');
    const file = join(root, 'mountinfo');
    writeFileSync(file, '\n\n1 2 3\n22 1 8:1 / /data rw - ext4 /dev/sda1 rw\n\n');
    assert.deepEqual([...mountPoints(file)], ['/data']);
  });

  test('the real mountinfo of this process includes /', () => {
    assert.ok(mountPoints().has('/'));
  });
});

describe('NetnsObserver.observe', () => {
  test('no recorded namespace is unobservable', () => {
    const { observer } = fixture();
    for (const path of [undefined, '']) {
      const o = observer.observe(path);
      assert.equal(o.kind, 'unobservable');
      assert.match(o.kind === 'unobservable' ? o.reason : '', /no network namespace/);
    }
  });

  test('a process namespace path is unobservable, even when the process is gone', () => {
    const { observer } = fixture();
    for (const path of [
      '/proc/123/ns/net',
      '/proc/4194304/ns/net',
      '/proc/1/task/7/ns/net',
      `/proc/${process.pid}/ns/net`,
    ]) {
      const o = observer.observe(path);
      assert.equal(o.kind, 'unobservable', path);
      assert.match(o.kind === 'unobservable' ? o.reason : '', /process/);
    }
  });

  test('a path outside every configured directory is unobservable, naming its directory', () => {
    const { observer, root, mounted } = fixture();
    const cases: Array<[string, string]> = [
      [join(root, 'elsewhere', 'ns'), join(root, 'elsewhere')],
      [join(mounted, 'sub', 'ns'), join(mounted, 'sub')],
      [`${mounted}/../elsewhere/ns`, join(root, 'elsewhere')],
      ['/var/run/netns/cni-1', '/var/run/netns'],
      [join(root, 'ns'), root],
    ];
    for (const [path, dir] of cases) {
      const o = observer.observe(path);
      assert.equal(o.kind, 'unobservable', path);
      assert.ok(o.kind === 'unobservable' && o.reason.includes(dir), `${path}: ${JSON.stringify(o)}`);
    }
  });

  test('in a configured directory that is a mount point, an existing file exists and a missing one is gone', () => {
    const { observer, mounted } = fixture();
    assert.deepEqual(observer.observe(join(mounted, 'ns-present')), { kind: 'exists' });
    assert.deepEqual(observer.observe(join(mounted, 'ns-absent')), { kind: 'gone' });
    // The same, spelled differently.
    assert.deepEqual(observer.observe(`${mounted}/./ns-present`), { kind: 'exists' });
    assert.deepEqual(observer.observe(`${mounted}/../mounted/ns-absent`), { kind: 'gone' });
  });

  test('a dangling symlink still exists: only the entry itself is judged', () => {
    const { observer, mounted } = fixture();
    symlinkSync(join(mounted, 'nowhere'), join(mounted, 'ns-link'));
    assert.deepEqual(observer.observe(join(mounted, 'ns-link')), { kind: 'exists' });
  });

  test('in a configured directory that is not a mount point, nothing is judged, not even a missing file', () => {
    const { observer, plain } = fixture();
    for (const name of ['ns-present', 'ns-absent']) {
      const o = observer.observe(join(plain, name));
      assert.equal(o.kind, 'unobservable', name);
      assert.ok(
        o.kind === 'unobservable' && o.reason.includes(plain) && /not a mount point/.test(o.reason),
        JSON.stringify(o),
      );
    }
  });

  test('in a configured directory that does not exist, nothing is judged', () => {
    const { observer, missing } = fixture();
    const o = observer.observe(join(missing, 'ns-absent'));
    assert.equal(o.kind, 'unobservable');
    assert.ok(o.kind === 'unobservable' && o.reason.includes(missing) && /ENOENT/.test(o.reason), JSON.stringify(o));
  });

  test('a configured directory that is a file is unobservable', () => {
    const root = realpathSync(tempDir('warren-netns-'));
    const file = join(root, 'file');
    writeFileSync(file, '');
    const observer = new NetnsObserver([file], fakeMountinfo(root, [file]));
    const o = observer.observe(join(file, 'ns'));
    assert.equal(o.kind, 'unobservable');
    assert.match(o.kind === 'unobservable' ? o.reason : '', /ENOTDIR/);
  });

  test('with an unreadable mountinfo nothing is a mount point, so nothing is judged', () => {
    const { mounted, root } = fixture();
    const observer = new NetnsObserver([mounted], join(root, 'no-mountinfo'));
    assert.equal(observer.observe(join(mounted, 'ns-absent')).kind, 'unobservable');
  });

  test('a configured directory reached through a symlink counts when its real path is mounted', () => {
    const { mounted, root, mountinfo } = fixture();
    const link = join(root, 'link');
    symlinkSync(mounted, link);
    const observer = new NetnsObserver([link], mountinfo);
    assert.deepEqual(observer.observe(join(link, 'ns-present')), { kind: 'exists' });
    assert.deepEqual(observer.observe(join(link, 'ns-absent')), { kind: 'gone' });
    assert.deepEqual(
      observer.observe(join(mounted, 'ns-absent')),
      { kind: 'gone' },
      'the real path is the same directory, whatever the spelling',
    );
  });

  test("a namespace recorded as /run/netns/NAME is judged when /var/run/netns is configured, and the reverse (podman's namespaces, issue 10)", () => {
    // A miniature of the host: run/netns is a mount point and var/run links to run.
    const root = realpathSync(tempDir('warren-netns-'));
    const run = join(root, 'run');
    mkdirSync(join(run, 'netns'), { recursive: true });
    writeFileSync(join(run, 'netns', 'podman-live'), '');
    mkdirSync(join(root, 'var'));
    symlinkSync(run, join(root, 'var', 'run'));
    const mountinfo = fakeMountinfo(root, [join(run, 'netns')]);
    const runSpelling = join(run, 'netns');
    const varRunSpelling = join(root, 'var', 'run', 'netns');
    for (const configured of [[varRunSpelling], [runSpelling], [runSpelling, varRunSpelling]]) {
      const observer = new NetnsObserver(configured, mountinfo);
      for (const recorded of [runSpelling, varRunSpelling]) {
        assert.deepEqual(
          observer.observe(join(recorded, 'podman-live')),
          { kind: 'exists' },
          `${configured.join(',')} / ${recorded}`,
        );
        assert.deepEqual(
          observer.observe(join(recorded, 'cni-gone')),
          { kind: 'gone' },
          `${configured.join(',')} / ${recorded}`,
        );
      }
    }
  });

  test('a namespace whose directory cannot be resolved is not judged, even when a configured directory is gone too', () => {
    const root = realpathSync(tempDir('warren-netns-'));
    const link = join(root, 'link');
    symlinkSync(join(root, 'nowhere'), link);
    const observer = new NetnsObserver([link], fakeMountinfo(root, [join(root, 'nowhere')]));
    const o = observer.observe(join(link, 'ns'));
    assert.equal(o.kind, 'unobservable');
    const other = observer.observe(join(root, 'also-nowhere', 'ns'));
    assert.ok(
      other.kind === 'unobservable' && other.reason.includes(join(root, 'also-nowhere')),
      JSON.stringify(other),
    );
  });

  test('a mount point whose path has a space is recognised through its \\040 escape', () => {
    const root = realpathSync(tempDir('warren-netns-'));
    const dir = join(root, 'net ns');
    mkdirSync(dir);
    const observer = new NetnsObserver([dir], fakeMountinfo(root, [dir]));
    assert.deepEqual(observer.observe(join(dir, 'ns-absent')), { kind: 'gone' });
  });

  test('a shared cache keeps one verdict per directory for an audit; a fresh one looks again', () => {
    const root = realpathSync(tempDir('warren-netns-'));
    const dir = join(root, 'netns');
    mkdirSync(dir);
    const mountinfo = join(root, 'mountinfo');
    writeFileSync(mountinfo, `1 0 0:1 / ${dir} rw - tmpfs tmpfs rw\n`);
    const observer = new NetnsObserver([dir], mountinfo);
    const cache = new Map<string, { observable: boolean; reason?: string }>();
    assert.deepEqual(observer.observe(join(dir, 'a'), cache), { kind: 'gone' });
    assert.deepEqual([...cache.keys()], [dir]);
    writeFileSync(mountinfo, '');
    assert.deepEqual(observer.observe(join(dir, 'b'), cache), { kind: 'gone' }, 'the audit keeps its verdict');
    assert.equal(observer.observe(join(dir, 'b')).kind, 'unobservable', 'a new audit sees the unmount');
  });
});

describe('NetnsObserver.directories', () => {
  test('reports each configured directory and whether it can be observed', () => {
    const { observer, mounted, plain, missing } = fixture();
    const dirs = observer.directories();
    assert.deepEqual(
      dirs.map((d) => [d.dir, d.observable]),
      [
        [mounted, true],
        [plain, false],
        [missing, false],
      ],
    );
    assert.equal(dirs[0]?.reason, undefined);
    assert.match(dirs[1]?.reason ?? '', /not a mount point/);
    assert.match(dirs[2]?.reason ?? '', /ENOENT/);
    for (const d of dirs.slice(1)) assert.ok(d.reason?.includes(d.dir), JSON.stringify(d));
  });

  test('configured directories are reported resolved, and none configured means none reported', () => {
    const { mounted, mountinfo } = fixture();
    const observer = new NetnsObserver([`${mounted}/`, `${mounted}/../mounted`], mountinfo);
    assert.deepEqual(
      observer.directories().map((d) => [d.dir, d.observable]),
      [
        [mounted, true],
        [mounted, true],
      ],
    );
    assert.deepEqual(new NetnsObserver([], mountinfo).directories(), []);
    assert.equal(new NetnsObserver([], mountinfo).observe(join(mounted, 'ns-absent')).kind, 'unobservable');
  });
});

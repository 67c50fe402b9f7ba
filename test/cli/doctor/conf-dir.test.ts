/**
 * The configs of a conf dir that name Warren, read from a temp dir as the runtime reads them and
 * parsed as the agent parses an ADD: a .conf, a .conflist's plugin (with the list's cniVersion and
 * name), a .json of either shape; in name order; what each asks (socket, journal dir, store,
 * ignored whereabouts keys) or the agent's refusal word for word; files that are not configs
 * listed apart, never thrown.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { scanConfDir } from '../../../src/cli/doctor/conf-dir.ts';
import { MAX_CONFIG_BYTES } from '../../../src/api/limits.ts';
import { tempDir } from '../../helpers/processes.ts';

function confDir(files: Record<string, unknown>): string {
  const dir = tempDir('warren-doctor-conf-');
  for (const [name, content] of Object.entries(files))
    writeFileSync(join(dir, name), typeof content === 'string' ? content : JSON.stringify(content));
  return dir;
}

const warrenIpam = (extra: Record<string, unknown> = {}) => ({ type: 'warren', range: '10.1.0.0/24', ...extra });

describe('the conf dir', () => {
  it('finds the configs that name warren in the runtime order, with what each asks', () => {
    const dir = confDir({
      '20-list.conflist': {
        cniVersion: '1.0.0',
        name: 'listnet',
        plugins: [
          {
            type: 'bridge',
            bridge: 'br0',
            ipam: warrenIpam({ socket: '/run/a.sock', journal_dir: '/var/a', store: 'etcd' }),
          },
          { type: 'portmap' },
        ],
      },
      '10-single.conf': { cniVersion: '0.4.0', name: 'singlenet', type: 'macvlan', ipam: warrenIpam() },
      '30-other.conf': { cniVersion: '1.0.0', name: 'other', type: 'bridge', ipam: { type: 'host-local' } },
      '40-list.json': {
        cniVersion: '1.0.0',
        name: 'jsonnet',
        plugins: [{ type: 'loopback' }, { type: 'ipvlan', ipam: warrenIpam() }],
      },
      'README.md': 'not a config',
    });
    mkdirSync(join(dir, '50-dir.conf')); // a directory with a config's name: skipped, as the runtime does
    const scan = scanConfDir(dir);
    assert.deepEqual(scan.listing, { kind: 'listed' });
    assert.deepEqual(scan.malformed, []);
    assert.deepEqual(scan.others, [join(dir, '30-other.conf')]);
    assert.deepEqual(scan.configs, [
      { file: join(dir, '10-single.conf'), reading: { kind: 'parsed', network: 'singlenet', ignoredKeys: [] } },
      {
        file: join(dir, '20-list.conflist'),
        plugin: 0,
        reading: {
          kind: 'parsed',
          network: 'listnet',
          socket: '/run/a.sock',
          journalDir: '/var/a',
          store: 'etcd',
          ignoredKeys: [],
        },
      },
      { file: join(dir, '40-list.json'), plugin: 1, reading: { kind: 'parsed', network: 'jsonnet', ignoredKeys: [] } },
    ]);
  });

  it("keeps the whereabouts keys a config carries that do nothing here, with the agent's reason", () => {
    const dir = confDir({
      '10-wb.conflist': {
        cniVersion: '1.0.0',
        name: 'wb',
        plugins: [{ type: 'macvlan', ipam: warrenIpam({ etcd_host: 'http://etcd:2379', log_level: 'debug' }) }],
      },
    });
    const [config] = scanConfDir(dir).configs;
    assert.equal(config?.reading.kind, 'parsed');
    if (config?.reading.kind !== 'parsed') return;
    assert.deepEqual(
      config.reading.ignoredKeys.map((k) => k.path),
      ['ipam.etcd_host', 'ipam.log_level'],
    );
    assert.ok(config.reading.ignoredKeys.every((k) => k.reason.length > 0));
  });

  it("gives the agent's refusal of a config naming warren, word for word", () => {
    const dir = confDir({
      '10-bad.conf': { cniVersion: '1.0.0', name: 'bad', type: 'bridge', ipam: warrenIpam({ range: 'not-a-cidr' }) },
      '20-unknown.conflist': {
        cniVersion: '1.0.0',
        name: 'unk',
        plugins: [{ type: 'bridge', ipam: warrenIpam({ rnage: '10.0.0.0/8' }) }],
      },
      '30-version.conf': { cniVersion: '9.9.9', name: 'ver', type: 'bridge', ipam: warrenIpam() },
    });
    const refusals = scanConfDir(dir).configs.map((c) => (c.reading.kind === 'refused' ? c.reading.message : 'parsed'));
    assert.equal(refusals.length, 3);
    assert.match(refusals[0] ?? '', /^ipam\.range: /);
    assert.match(refusals[1] ?? '', /rnage/);
    assert.match(refusals[2] ?? '', /cniVersion "9\.9\.9" is not supported/);
  });

  it('lists files that are not configs apart, saying whether they mention warren', () => {
    const dir = confDir({
      '10-truncated.conflist':
        '{"cniVersion": "1.0.0", "name": "n", "plugins": [{"type": "bridge", "ipam": {"type": "warren"',
      '20-array.conf': '[1, 2]',
      '30-garbage.json': 'hello',
      '40-big.conf': `{"pad": "${'x'.repeat(MAX_CONFIG_BYTES)}"}`,
    });
    const scan = scanConfDir(dir);
    assert.deepEqual(scan.configs, []);
    assert.deepEqual(
      scan.malformed.map((m) => [m.file.slice(dir.length + 1), m.mentionsWarren]),
      [
        ['10-truncated.conflist', true],
        ['20-array.conf', false],
        ['30-garbage.json', false],
        ['40-big.conf', false],
      ],
    );
    assert.match(scan.malformed[0]?.reason ?? '', /^is not a network config: /);
    assert.equal(scan.malformed[1]?.reason, 'is not a network config: not a JSON object');
    assert.equal(scan.malformed[3]?.reason, `is larger than ${MAX_CONFIG_BYTES} bytes`);
  });

  it('says a missing dir is missing and an unlistable one why', () => {
    const missing = join(tempDir('warren-doctor-conf-'), 'nope');
    assert.deepEqual(scanConfDir(missing), {
      dir: missing,
      listing: { kind: 'missing' },
      configs: [],
      malformed: [],
      others: [],
    });
    const file = join(tempDir('warren-doctor-conf-'), 'file');
    writeFileSync(file, '');
    const r = scanConfDir(file);
    assert.equal(r.listing.kind, 'unreadable');
    assert.match(r.listing.kind === 'unreadable' ? r.listing.reason : '', /ENOTDIR/);
  });

  it('reports a FIFO and a link to /dev/zero named like configs as not regular files, without blocking on or reading them', () => {
    const dir = confDir({
      '10-single.conf': { cniVersion: '0.4.0', name: 'singlenet', type: 'macvlan', ipam: warrenIpam() },
    });
    execFileSync('mkfifo', [join(dir, '05-x.conf')]);
    symlinkSync('/dev/zero', join(dir, '06-zero.conf'));
    const scan = scanConfDir(dir);
    assert.deepEqual(scan.malformed, [
      { file: join(dir, '05-x.conf'), reason: 'is a FIFO, not a regular file', mentionsWarren: false },
      { file: join(dir, '06-zero.conf'), reason: 'is a character device, not a regular file', mentionsWarren: false },
    ]);
    assert.equal(scan.configs.length, 1);
  });
});

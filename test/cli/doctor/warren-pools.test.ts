/**
 * `warren doctor` on configs naming WarrenPools (cli/doctor/store-scope.ts): real config files in a
 * temp conf dir against the agent's facts. A pool the cluster does not have is an error naming it;
 * an agent that reads no pools (not on the kubernetes store) cannot serve such a config at all; an
 * agent that has not listed them yet says nothing either way.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { DoctorFacts } from '../../../src/api/doctor.ts';
import { DEFAULT_SOCKET } from '../../../src/api/socket.ts';
import { DEFAULT_JOURNAL_DIR } from '../../../src/cni/journal-dir.ts';
import { scanConfDir } from '../../../src/cli/doctor/conf-dir.ts';
import type { Finding } from '../../../src/cli/doctor/finding.ts';
import { configFindings } from '../../../src/cli/doctor/node-checks.ts';
import type { StoreKind } from '../../../src/store/store.ts';
import { tempDir } from '../../helpers/processes.ts';

function facts(kind: StoreKind, warrenPools?: DoctorFacts['warrenPools']): DoctorFacts {
  return {
    node: 'node-a',
    version: '1.2.3',
    pid: 42,
    socket: DEFAULT_SOCKET,
    stateDir: '/var/lib/warren',
    journalDir: DEFAULT_JOURNAL_DIR,
    cniConfDir: '/etc/cni/net.d',
    manageCniConfig: false,
    store: { kind, description: kind, healthy: true },
    netns: [],
    recordedNetns: [],
    ...(warrenPools === undefined ? {} : { warrenPools }),
  };
}

function findingsOf(pools: readonly string[], agent: DoctorFacts): Finding[] {
  const dir = tempDir('warren-doctor-pools-');
  const config = { cniVersion: '1.0.0', name: 'tenants', type: 'macvlan', ipam: { type: 'warren', pools } };
  writeFileSync(join(dir, '10-tenants.conf'), JSON.stringify(config));
  return configFindings(scanConfDir(dir), agent).filter((f) => f.id.startsWith('warren-pool'));
}

describe('doctor on configs naming WarrenPools', () => {
  it('flags a pool that does not exist as an error, naming it and the pools there are', () => {
    const found = findingsOf(['gold', 'lead'], facts('kubernetes', { listed: true, names: ['gold', 'silver'] }));
    assert.equal(found.length, 1);
    const [f] = found as [Finding];
    assert.equal(f.id, 'warren-pool-missing');
    assert.equal(f.severity, 'error');
    assert.match(f.title, /names WarrenPool that does not exist: lead/);
    assert.match(f.detail, /gold, silver/);
  });

  it('says the pools exist when they do, and nothing before the agent listed them', () => {
    const found = findingsOf(['gold'], facts('kubernetes', { listed: true, names: ['gold'] }));
    assert.deepEqual(
      found.map((f) => [f.id, f.severity]),
      [['warren-pools-exist', 'ok']],
    );
    assert.deepEqual(findingsOf(['gold'], facts('kubernetes', { listed: false, names: [] })), []);
  });

  it('is an error on an agent that reads no pools', () => {
    const found = findingsOf(['gold'], facts('sqlite'));
    assert.deepEqual(
      found.map((f) => [f.id, f.severity]),
      [['warren-pools-unserved', 'error']],
    );
  });
});

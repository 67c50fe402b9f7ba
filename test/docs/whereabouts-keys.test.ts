/**
 * docs/ipam-keys.md's table of whereabouts' keys, held to the parser (issue 37, item 5): every key
 * of whereabouts' config (v0.9, its pkg/types) is listed, and each does what its row says — a key
 * the row calls honoured parses and is not reported as ignored; one it calls ignored (or served by
 * the agent's store) parses, and the agent is told it does nothing here, with why; one it calls
 * refused is refused, naming the key. A key added to the parser's ignored list without a row, or a
 * row that says one thing while the parser does another, fails here.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { IGNORED_KEYS } from '../../src/cni/whereabouts-keys.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import { codeSpans, docPage, tableColumn } from './doc-tables.ts';

/** whereabouts v0.9's IPAM keys (pkg/types: IPAMConfig and its range entries), `type` aside. */
const WHEREABOUTS_KEYS = [
  'range',
  'range_start',
  'range_end',
  'exclude',
  'ipRanges',
  'network_name',
  'enable_overlapping_ranges',
  'node_slice_size',
  'leader_lease_duration',
  'leader_renew_deadline',
  'leader_retry_period',
  'reconciler_cron_expression',
  'kubernetes',
  'configuration_path',
  'log_file',
  'log_level',
  'datastore',
  'etcd_host',
  'etcd_username',
  'etcd_password',
  'etcd_key_file',
  'etcd_cert_file',
  'etcd_ca_cert_file',
  'sleep_for_race',
  'gateway',
  'routes',
  'dns',
  'enable_l3',
  'optimistic_ipam',
  'addresses',
];

/** A value of the type whereabouts reads for each key, inside `10.37.0.0/24`. */
const SAMPLE: Readonly<Record<string, unknown>> = {
  range: '10.37.0.0/24',
  range_start: '10.37.0.10',
  range_end: '10.37.0.20',
  exclude: ['10.37.0.12/32'],
  ipRanges: [{ range: '10.38.0.0/24' }],
  network_name: 'keys',
  enable_overlapping_ranges: true,
  exclude_gateway: true,
  node_slice_size: '/28',
  leader_lease_duration: 1500,
  leader_renew_deadline: 1000,
  leader_retry_period: 500,
  reconciler_cron_expression: '30 4 * * *',
  kubernetes: { kubeconfig: '/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig' },
  configuration_path: '/etc/cni/net.d/whereabouts.d/whereabouts.conf',
  log_file: '/tmp/whereabouts.log',
  log_level: 'debug',
  datastore: 'kubernetes',
  etcd_host: '127.0.0.1:2379',
  etcd_username: 'user',
  etcd_password: 'secret',
  etcd_key_file: '/k.pem',
  etcd_cert_file: '/c.pem',
  etcd_ca_cert_file: '/ca.pem',
  sleep_for_race: 1,
  optimistic_ipam: true,
  gateway: '10.37.0.1',
  routes: [{ dst: '0.0.0.0/0' }],
  dns: { nameservers: ['10.37.0.53'] },
  enable_l3: true,
  addresses: [{ address: '10.37.0.7/24' }],
  type: 'whereabouts',
};

type Verdict = 'honoured' | 'ignored' | 'refused';

/** The table's rows: each key of its first column, with what its second column says Warren does. */
function rows(): Map<string, { verdict: Verdict; said: string }> {
  const page = docPage('ipam-keys.md');
  const table = page.slice(page.indexOf("## Whereabouts' keys"), page.indexOf("## host-local's keys"));
  const keys = tableColumn(table, 0);
  const said = tableColumn(table, 1);
  const out = new Map<string, { verdict: Verdict; said: string }>();
  for (const [i, cell] of keys.entries()) {
    const text = said[i] ?? '';
    const verdict: Verdict = /^honoured/.test(text) ? 'honoured' : /^refused/.test(text) ? 'refused' : 'ignored';
    // Only the keys before a parenthesis: `ipRanges` (`range`, …) lists the entries' keys, also whereabouts'.
    for (const key of codeSpans(cell.replace(/\(([^)]*)\)/g, '')))
      out.set(key.split(' ')[0] as string, { verdict, said: text });
  }
  return out;
}

function parse(key: string): ReturnType<typeof parseIpamConfig> {
  const base: Record<string, unknown> = { type: 'whereabouts', range: '10.37.0.0/24' };
  if (key === 'ipRanges') delete base.range;
  return parseIpamConfig({ ...base, [key]: SAMPLE[key] });
}

describe("docs/ipam-keys.md: whereabouts' keys", () => {
  const table = rows();

  it("lists every key of whereabouts' config", () => {
    const missing = WHEREABOUTS_KEYS.filter((key) => !table.has(key));
    assert.deepEqual(missing, [], 'keys of whereabouts the table does not say anything of');
  });

  it('lists every key the parser accepts and ignores, and calls none honoured that the parser ignores', () => {
    for (const key of IGNORED_KEYS.keys())
      assert.equal(table.get(key)?.verdict, 'ignored', `${key}: ${table.get(key)?.said}`);
  });

  for (const key of WHEREABOUTS_KEYS) {
    it(`does with ${key} what its row says`, () => {
      const row = table.get(key);
      assert.ok(row !== undefined, `${key} has a row`);
      assert.ok(key in SAMPLE, `a sample value of ${key}`);
      if (row.verdict === 'refused') {
        assert.throws(
          () => parse(key),
          (e: unknown) => isWarrenError(e) && e.code === 'INVALID_CONFIG' && e.message.includes(key),
        );
        return;
      }
      const config = parse(key);
      const ignored = config.ignoredKeys.map((k) => k.path);
      if (row.verdict === 'honoured') {
        assert.deepEqual(ignored, [], `${key} is honoured, not reported as ignored`);
        return;
      }
      // Ignored, or served by the agent's store: accepted; a key that configures whereabouts itself
      // is told to the agent with why (its default-valued flags, which say what Warren does anyway,
      // are not).
      if (IGNORED_KEYS.has(key)) {
        assert.deepEqual(ignored, [`ipam.${key}`]);
        assert.ok((config.ignoredKeys[0]?.reason ?? '').length > 10, 'with why');
      }
    });
  }
});

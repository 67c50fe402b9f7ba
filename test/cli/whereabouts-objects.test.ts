/**
 * Reading whereabouts' objects for the migration (src/cli/migrate/whereabouts-objects.ts,
 * whereabouts-names.ts, holdings.ts), fuzzed: whatever an IPPool, a reservation or a definition
 * holds, the reader answers a value or a clear INVALID_CONFIG naming the object and the field,
 * never another exception; and planning over lists of anything never throws at all.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { collectHoldings } from '../../src/cli/migrate/holdings.ts';
import { planMigration } from '../../src/cli/migrate/plan.ts';
import { podFactsOf } from '../../src/cli/migrate/pod-facts.ts';
import {
  ipPoolName,
  readReservationName,
  reservationName,
  sliceNodeOf,
} from '../../src/cli/migrate/whereabouts-names.ts';
import { parseAttachmentDefinition, parseIpPool, parseReservation } from '../../src/cli/migrate/whereabouts-objects.ts';
import { isWarrenError } from '../../src/core/errors.ts';
import { formatIP } from '../../src/ipam/address.ts';

/** Holds when `read` answers or refuses clearly: INVALID_CONFIG, the object first, then a field. */
function answersOrRefusesClearly(kind: string, read: () => unknown): void {
  try {
    read();
  } catch (error) {
    assert.ok(isWarrenError(error, 'INVALID_CONFIG'), `not a clear refusal: ${String(error)}`);
    const object = new RegExp(
      `^${kind} (#\\d+ of the listing \\(it has no metadata\\.name\\)|"(?:[^"\\\\]|\\\\.)*"|\\S+): `,
    );
    const named = object.exec(error.message);
    assert.ok(named !== null, `the object is not named first: ${error.message}`);
    assert.match(
      error.message.slice(named[0].length),
      /^(spec|metadata|\(object\))(\["(?:[^"\\]|\\.)*"\]|\[\d+\]|[^\s[])*: \S/,
      error.message,
    );
  }
}

const meta = fc.record(
  { name: fc.oneof(fc.constantFrom('pool-a', '10.0.0.0-24'), fc.string()), namespace: fc.string({ maxLength: 8 }) },
  { requiredKeys: [] },
);
const podref = fc.oneof(fc.constantFrom('default/web-0', 'a/b/c', '/x', 'ns/', ''), fc.string(), fc.anything());
const allocation = fc.oneof(
  fc.record(
    {
      id: fc.oneof(fc.stringMatching(/^[0-9a-f]{1,64}$/), fc.anything()),
      podref,
      ifname: fc.oneof(fc.constant('net1'), fc.anything()),
    },
    { requiredKeys: [] },
  ),
  fc.anything(),
);
const offsetKey = fc.oneof(
  fc.nat({ max: 300 }).map(String),
  fc.constantFrom('-1', '1e3', '0x1', '', ' 2', '99999999999999999999999999999999999999999999'),
  fc.string(),
);
const ipPoolArb = fc.record(
  {
    apiVersion: fc.constant('whereabouts.cni.cncf.io/v1alpha1'),
    kind: fc.constant('IPPool'),
    metadata: fc.oneof(meta, fc.anything()),
    spec: fc.oneof(
      fc.record(
        {
          range: fc.oneof(
            fc.constantFrom('10.0.0.0/24', '10.0.0.5/28', 'fd00::/120', '10.0.0.0', 'nonsense', '10.0.0.0/33'),
            fc.anything(),
          ),
          allocations: fc.oneof(fc.dictionary(offsetKey, allocation, { maxKeys: 5 }), fc.anything()),
        },
        { requiredKeys: [] },
      ),
      fc.anything(),
    ),
  },
  { requiredKeys: [] },
);

describe('IPPool reader, fuzzed', () => {
  it('answers a pool or refuses naming the object and the field, for anything shaped like an IPPool', () => {
    fc.assert(
      fc.property(ipPoolArb, (object) => {
        answersOrRefusesClearly('IPPool', () => {
          const pool = parseIpPool(object);
          // What it answers is sound: each address inside the range's network.
          const bits = pool.range.address.family === 4 ? 32 : 128;
          const shift = BigInt(bits - pool.range.length);
          for (const a of pool.allocations) assert.equal(a.address.value >> shift, pool.range.address.value >> shift);
        });
      }),
      { numRuns: 2000 },
    );
  });

  it('refuses anything at all with a clear error, never a crash', () => {
    fc.assert(fc.property(fc.anything(), (object) => answersOrRefusesClearly('IPPool', () => parseIpPool(object))));
  });

  it('names the object and the field of each mistake', () => {
    const pool = (spec: unknown) => ({ metadata: { name: 'p', namespace: 'kube-system' }, spec });
    const refusals: Array<[unknown, RegExp]> = [
      [
        pool({ range: '10.0.0.0/24', allocations: { '300': { id: 'c', podref: 'a/b' } } }),
        /^IPPool kube-system\/p: spec\.allocations\["300"\]: offset 300 from 10\.0\.0\.0 lies outside 10\.0\.0\.0\/24$/,
      ],
      [
        pool({ range: '10.0.0.0/24', allocations: { x: { id: 'c' } } }),
        /spec\.allocations\["x"\]: the key must be an offset/,
      ],
      [
        pool({ range: '10.0.0.0/24', allocations: { '1': { podref: 'a/b' } } }),
        /spec\.allocations\["1"\]\.id: missing/,
      ],
      [
        pool({ range: '10.0.0.0/24', allocations: { '1': { id: 'c', podref: 'web-0' } } }),
        /spec\.allocations\["1"\]\.podref: must be "namespace\/name" of a pod, got "web-0"/,
      ],
      [pool({ range: 'fd00::/129' }), /^IPPool kube-system\/p: spec\.range: "fd00::\/129" is not a CIDR$/],
      [pool({}), /spec\.range: must be a CIDR, got nothing/],
      [
        { spec: { range: '10.0.0.0/24' } },
        /^IPPool #1 of the listing \(it has no metadata\.name\): metadata\.name: missing$/,
      ],
    ];
    for (const [object, message] of refusals)
      assert.throws(
        () => parseIpPool(object),
        (e: unknown) => isWarrenError(e, 'INVALID_CONFIG') && message.test(e.message),
      );
  });

  it('counts offsets from the address spec.range names, as whereabouts does', () => {
    const pool = parseIpPool({
      metadata: { name: 'p' },
      spec: { range: '10.0.0.5/28', allocations: { '2': { id: 'c', podref: 'a/b' } } },
    });
    assert.equal(formatIP(pool.allocations[0]?.address ?? { family: 4, value: 0n }), '10.0.0.7');
  });
});

describe('reservation and definition readers, fuzzed', () => {
  it('a reservation answers or refuses clearly', () => {
    const arb = fc.oneof(
      fc.record(
        {
          metadata: fc.oneof(meta, fc.anything()),
          spec: fc.oneof(
            fc.record({ containerid: fc.anything(), podref, ifname: fc.anything() }, { requiredKeys: [] }),
            fc.anything(),
          ),
        },
        { requiredKeys: [] },
      ),
      fc.anything(),
    );
    fc.assert(
      fc.property(arb, (o) => answersOrRefusesClearly('OverlappingRangeIPReservation', () => parseReservation(o))),
    );
  });

  it('a definition answers or refuses clearly, whatever its config text holds', () => {
    const ipam = fc.record(
      {
        type: fc.constantFrom('whereabouts', 'warren', 'host-local'),
        range: fc.oneof(fc.constant('10.1.0.0/24'), fc.anything()),
        network_name: fc.anything(),
      },
      { requiredKeys: ['type'] },
    );
    const config = fc.oneof(
      fc
        .record({ name: fc.anything(), type: fc.constant('macvlan'), ipam }, { requiredKeys: ['ipam'] })
        .map((c) => JSON.stringify(c)),
      fc
        .record({
          name: fc.string(),
          plugins: fc.oneof(fc.array(fc.record({ type: fc.string(), ipam }, { requiredKeys: [] })), fc.anything()),
        })
        .map((c) => JSON.stringify(c)),
      fc.string(),
      fc.anything(),
    );
    const arb = fc.record(
      { metadata: meta, spec: fc.oneof(fc.record({ config }), fc.anything()) },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(arb, (o) =>
        answersOrRefusesClearly('NetworkAttachmentDefinition', () => parseAttachmentDefinition(o)),
      ),
      { numRuns: 1000 },
    );
  });

  it('planning over lists of anything reports problems and never throws', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(ipPoolArb, fc.anything()), { maxLength: 4 }),
        fc.array(fc.anything(), { maxLength: 3 }),
        fc.array(fc.anything(), { maxLength: 3 }),
        (ipPools, reservations, definitions) => {
          const { holdings } = collectHoldings({ ipPools, reservations, definitions });
          planMigration({
            holdings,
            podOf: () => podFactsOf({ metadata: { uid: 'u' }, spec: { nodeName: 'n' } }),
            warren: { allocations: new Map(), grants: [], blocks: new Map() },
            now: 0,
          });
        },
      ),
    );
  });
});

describe("whereabouts' names", () => {
  const ip = fc.oneof(
    fc.bigInt({ min: 0n, max: (1n << 32n) - 1n }).map((value) => ({ family: 4 as const, value })),
    fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }).map((value) => ({ family: 6 as const, value })),
  );
  const networkName = fc.oneof(fc.constant(''), fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,10}$/));

  it("reads back every reservation's address and network among the names it is given", () => {
    fc.assert(
      fc.property(ip, networkName, fc.array(networkName, { maxLength: 3 }), (address, name, others) => {
        const readings = readReservationName(reservationName(address, name), [name, ...others]);
        assert.ok(
          readings.some(
            (r) => r.networkName === name && r.address.value === address.value && r.address.family === address.family,
          ),
        );
      }),
    );
  });

  it('names pools and reservations as whereabouts does', () => {
    assert.equal(ipPoolName('192.168.2.224/28', ''), '192.168.2.224-28');
    assert.equal(ipPoolName('fd00:30::/120', 'blue'), 'blue-fd00-30---120');
    assert.equal(reservationName({ family: 6, value: 0xfd00n << 112n }, ''), 'fd00--0');
    assert.equal(sliceNodeOf('blue-node-1-10.0.0.0-28', '10.0.0.0/28', 'blue'), 'node-1');
    assert.equal(sliceNodeOf('blue-10.0.0.0-28', '10.0.0.0/28', 'blue'), undefined);
  });
});

describe('which definition an address belongs to', () => {
  const definition = (name: string, namespace: string, network: string, ipam: Record<string, unknown>) => ({
    metadata: { name, namespace },
    spec: {
      config: JSON.stringify({
        cniVersion: '1.0.0',
        name: network,
        type: 'macvlan',
        ipam: { type: 'whereabouts', ...ipam },
      }),
    },
  });

  it("places a node slice's addresses in the range holding the slice", () => {
    const { holdings, problems } = collectHoldings({
      definitions: [
        definition('d', 'default', 'net-d', { range: '10.9.0.0/16', network_name: 'n9', node_slice_size: '/24' }),
      ],
      ipPools: [
        {
          metadata: { name: 'n9-worker-1-10.9.4.0-24' },
          spec: { range: '10.9.4.0/24', allocations: { '3': { id: 'c', podref: 'a/b' } } },
        },
      ],
      reservations: [],
    });
    assert.deepEqual(problems, []);
    assert.deepEqual(
      holdings.map((h) => `${h.pool} ${h.address}`),
      ['10.9.0.0/16@n9 10.9.4.3'],
    );
  });

  it("asks the pod's network-status when several networks share a range, and guesses nothing without it", () => {
    const objects = {
      definitions: [
        definition('a', 'ns', 'net-a', { range: '10.8.0.0/24' }),
        definition('b', 'ns', 'net-b', { range: '10.8.0.0/24' }),
      ],
      ipPools: [
        {
          metadata: { name: '10.8.0.0-24' },
          spec: { range: '10.8.0.0/24', allocations: { '4': { id: 'c', podref: 'ns/p', ifname: 'net1' } } },
        },
      ],
      reservations: [],
    };
    const { holdings } = collectHoldings(objects);
    const view = { allocations: new Map(), grants: [], blocks: new Map() };
    const status = JSON.stringify([{ name: 'ns/b', interface: 'net1', ips: ['10.8.0.4'] }]);
    const told = podFactsOf({
      metadata: { uid: 'u', annotations: { 'k8s.v1.cni.cncf.io/network-status': status } },
      spec: { nodeName: 'n' },
    });
    const untold = podFactsOf({ metadata: { uid: 'u' }, spec: { nodeName: 'n' } });
    const plan = planMigration({ holdings, podOf: () => told, warren: view, now: 0 });
    assert.equal(plan.writes[0]?.grants[0]?.holder?.network, 'net-b');
    const unsure = planMigration({ holdings, podOf: () => untold, warren: view, now: 0 });
    assert.equal(unsure.entries[0]?.outcome, 'unresolved');
    assert.deepEqual(unsure.writes, []);
  });

  it('reports an IPPool no definition configures, and one that disagrees with its reservation', () => {
    const { problems } = collectHoldings({
      definitions: [definition('a', 'ns', 'net-a', { range: '10.7.0.0/24' })],
      ipPools: [
        {
          metadata: { name: '10.6.0.0-24', namespace: 'ws' },
          spec: { range: '10.6.0.0/24', allocations: { '1': { id: 'c', podref: 'a/b' } } },
        },
        {
          metadata: { name: '10.7.0.0-24', namespace: 'ws' },
          spec: { range: '10.7.0.0/24', allocations: { '1': { id: 'c', podref: 'a/b' } } },
        },
      ],
      reservations: [{ metadata: { name: '10.7.0.1', namespace: 'ws' }, spec: { containerid: 'd', podref: 'a/c' } }],
    });
    assert.deepEqual(
      problems.map((p) => p.object),
      ['IPPool ws/10.6.0.0-24', 'OverlappingRangeIPReservation ws/10.7.0.1'],
    );
  });
});

/**
 * The network selection annotation: both of Multus' forms, the element an ADD is for, and that any
 * input — fuzzed — answers a list or a clear INVALID_CONFIG, never a crash.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { WarrenError } from '../../src/core/errors.ts';
import {
  DEFAULT_NETWORK_ANNOTATION,
  NETWORKS_ANNOTATION,
  type NetworkSelectionElement,
  defaultElementOn,
  elementOnInterface,
  interfaceOf,
  parseNetworkSelection,
} from '../../src/cni/network-selection.ts';

/** Asserts an INVALID_CONFIG naming the annotation and matching `detail`. */
function refused(fn: () => unknown, detail: RegExp, annotation = NETWORKS_ANNOTATION): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof WarrenError, `expected a WarrenError, got ${String(error)}`);
    assert.equal(error.code, 'INVALID_CONFIG');
    assert.ok(error.message.startsWith(`annotation ${annotation}: `), error.message);
    assert.match(error.message, detail);
    return true;
  });
}

describe('parseNetworkSelection: the JSON form', () => {
  test('reads name, namespace, interface and ipam-claim-reference, passing other keys over', () => {
    const value = JSON.stringify([
      { name: 'tenant-a', namespace: 'vms', interface: 'pod16477688c0e', 'ipam-claim-reference': 'vm-a.tenant-a' },
      { name: 'storage', ips: ['10.0.0.5/24'], mac: '02:00:00:00:00:01', 'cni-args': { x: 1 } },
    ]);
    assert.deepEqual(parseNetworkSelection(value), [
      { name: 'tenant-a', namespace: 'vms', interface: 'pod16477688c0e', ipamClaimReference: 'vm-a.tenant-a' },
      { name: 'storage' },
    ]);
  });

  test('refuses what Multus could not have used, naming the element and the field', () => {
    refused(() => parseNetworkSelection('[{"name":'), /not valid JSON/);
    refused(() => parseNetworkSelection('{"name":"a"}'), /must be a list/);
    refused(() => parseNetworkSelection('[3]'), /element 0 must be an object, got number 3/);
    refused(() => parseNetworkSelection('[{"name":"a"},{"namespace":"b"}]'), /element 1 names no network/);
    refused(() => parseNetworkSelection('[{"name":""}]'), /element 0 names no network/);
    refused(() => parseNetworkSelection('[{"name":"a","interface":7}]'), /element 0: "interface" must be a string/);
    refused(
      () => parseNetworkSelection('[{"name":"a","ipam-claim-reference":"Not_A_Name"}]'),
      /"ipam-claim-reference" "Not_A_Name" is not an object name/,
    );
  });
});

describe('parseNetworkSelection: the short form', () => {
  test('reads [namespace/]name[@interface], comma-separated, spaces trimmed', () => {
    assert.deepEqual(parseNetworkSelection('a, other/b@net7 ,c@data'), [
      { name: 'a' },
      { name: 'b', namespace: 'other', interface: 'net7' },
      { name: 'c', interface: 'data' },
    ]);
  });

  test('an empty value selects nothing', () => {
    assert.deepEqual(parseNetworkSelection(''), []);
    assert.deepEqual(parseNetworkSelection('  '), []);
  });

  test('refuses a stray comma, a second "/" or "@", and parts that are not DNS-1123 labels', () => {
    refused(() => parseNetworkSelection('a,,b'), /entry 1 is empty/);
    refused(() => parseNetworkSelection('a,'), /entry 1 is empty/);
    refused(() => parseNetworkSelection('x/y/z'), /more than one "\/"/);
    refused(() => parseNetworkSelection('a@b@c'), /more than one "@"/);
    refused(() => parseNetworkSelection('ns/@eth1'), /names no network/);
    refused(() => parseNetworkSelection('Big'), /the name "Big" is not a DNS-1123 label/);
    refused(() => parseNetworkSelection('a@-x'), /the interface "-x" is not a DNS-1123 label/);
  });
});

describe('the element an ADD is for', () => {
  const elements = parseNetworkSelection(
    JSON.stringify([{ name: 'a' }, { name: 'b', interface: 'pod1234', 'ipam-claim-reference': 'vm.b' }, { name: 'c' }]),
  );

  test('is the one on the ADD interface: the one it names, else net<position+1>', () => {
    assert.equal(elementOnInterface(elements, 'net1')?.name, 'a');
    assert.equal(elementOnInterface(elements, 'pod1234')?.ipamClaimReference, 'vm.b');
    assert.equal(elementOnInterface(elements, 'net3')?.name, 'c');
    assert.equal(interfaceOf({ name: 'x' }, 4), 'net5');
  });

  test('is none when no element is on the interface (never a guess by name)', () => {
    assert.equal(elementOnInterface(elements, 'net2'), undefined);
    assert.equal(elementOnInterface(elements, 'eth0'), undefined);
  });

  test('two elements on one interface are refused', () => {
    const twice = parseNetworkSelection('a@data,b@data');
    refused(() => elementOnInterface(twice, 'data'), /2 elements select interface "data"/);
    assert.equal(elementOnInterface(twice, 'net1'), undefined);
  });

  test("the default network's element is on eth0 unless it names an interface", () => {
    const value = JSON.stringify([{ name: 'default', namespace: 'ovn', 'ipam-claim-reference': 'vm.pod' }]);
    assert.equal(defaultElementOn(value, 'eth0')?.ipamClaimReference, 'vm.pod');
    assert.equal(defaultElementOn(value, 'net1'), undefined);
    refused(() => defaultElementOn('a,b', 'eth0'), /selects 2 networks/, DEFAULT_NETWORK_ANNOTATION);
  });
});

/** A DNS-1123 label, as the short form takes it. */
const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$/);

describe('parseNetworkSelection: fuzzed', () => {
  test('any string answers a list or INVALID_CONFIG, never another error', () => {
    const alphabet = fc.constantFrom(...'[]{}",:/@ ,-abAZ09.\\\n\u0000'.split(''));
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: alphabet }), fc.json()), (value) => {
        try {
          const elements = parseNetworkSelection(value);
          for (const e of elements) assert.ok(typeof e.name === 'string' && e.name !== '');
        } catch (error) {
          assert.ok(error instanceof WarrenError && error.code === 'INVALID_CONFIG', String(error));
        }
      }),
      { numRuns: 2_000 },
    );
  });

  test('any JSON list of anything answers a list or INVALID_CONFIG', () => {
    const field = fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.array(fc.string()), fc.object());
    const item = fc.oneof(
      fc.anything(),
      fc.record(
        { name: field, namespace: field, interface: field, 'ipam-claim-reference': field },
        { requiredKeys: [] },
      ),
    );
    fc.assert(
      fc.property(fc.array(item), (items) => {
        try {
          parseNetworkSelection(JSON.stringify(items));
        } catch (error) {
          assert.ok(error instanceof WarrenError && error.code === 'INVALID_CONFIG', String(error));
        }
      }),
      { numRuns: 300 },
    );
  });

  test('valid elements written in either form read back as written', () => {
    const element = fc
      .record(
        { name: label, namespace: label, interface: label, ipamClaimReference: label },
        { requiredKeys: ['name'] },
      )
      .map((e): NetworkSelectionElement => ({ ...e })); // fast-check's records have no prototype
    fc.assert(
      fc.property(fc.array(element, { minLength: 1, maxLength: 6 }), (elements) => {
        const json = JSON.stringify(
          elements.map(({ ipamClaimReference, ...rest }) => ({
            ...rest,
            ...(ipamClaimReference === undefined ? {} : { 'ipam-claim-reference': ipamClaimReference }),
          })),
        );
        assert.deepEqual(parseNetworkSelection(json), elements);
        const short = elements
          .map(
            (e) =>
              `${e.namespace === undefined ? '' : `${e.namespace}/`}${e.name}${e.interface ? `@${e.interface}` : ''}`,
          )
          .join(', ');
        assert.deepEqual(
          parseNetworkSelection(short),
          elements.map(({ ipamClaimReference: _, ...rest }) => rest),
        );
      }),
      { numRuns: 500 },
    );
  });
});

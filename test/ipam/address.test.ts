/**
 * Address parsing and formatting: exact round trips for both families, RFC 5952 canonical IPv6
 * text (checked against the WHATWG URL serializer as an independent oracle), strict refusal of
 * anything ambiguous, and the CIDR arithmetic the ranges are built on.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  type Family,
  contains,
  formatCidr,
  formatIP,
  hostMask,
  isNetwork,
  lastOf,
  networkOf,
  parseCidr,
  parseIP,
} from '../../src/ipam/address.ts';

const MAX_V4 = (1n << 32n) - 1n;
const MAX_V6 = (1n << 128n) - 1n;

const v4Value = fc.bigInt({ min: 0n, max: MAX_V4 });
/** Whole-range IPv6 values, plus values built from words that are often zero (so `::` appears). */
const v6Value = fc.oneof(
  fc.bigInt({ min: 0n, max: MAX_V6 }),
  fc
    .array(fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 0, max: 0xffff })), {
      minLength: 8,
      maxLength: 8,
    })
    .map((words) => words.reduce((acc, w) => (acc << 16n) | BigInt(w), 0n)),
);

function wordsOf(value: bigint): number[] {
  const words: number[] = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n) words.push(Number((value >> shift) & 0xffffn));
  return words;
}

/** The WHATWG URL host serializer, which follows RFC 5952's compression rules. */
function urlCanonical(value: bigint): string {
  const full = wordsOf(value)
    .map((w) => w.toString(16))
    .join(':');
  return new URL(`http://[${full}]/`).hostname.slice(1, -1);
}

function v4(text: string): bigint {
  const ip = parseIP(text);
  assert.ok(ip !== undefined, `${text} should parse`);
  assert.equal(ip.family, 4);
  return ip.value;
}

function v6(text: string): bigint {
  const ip = parseIP(text);
  assert.ok(ip !== undefined, `${text} should parse`);
  assert.equal(ip.family, 6);
  return ip.value;
}

describe('parseIP and formatIP', () => {
  test('an IPv4 value survives formatting and parsing unchanged', () => {
    fc.assert(
      fc.property(v4Value, (value) => {
        const text = formatIP({ family: 4, value });
        assert.deepEqual(parseIP(text), { family: 4, value });
      }),
      { numRuns: 500 },
    );
  });

  test('an IPv6 value survives formatting and parsing unchanged', () => {
    fc.assert(
      fc.property(v6Value, (value) => {
        const text = formatIP({ family: 6, value });
        assert.deepEqual(parseIP(text), { family: 6, value });
      }),
      { numRuns: 500 },
    );
  });

  test('formatting is stable: formatting the parse of formatted text gives the same text', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          v4Value.map((value) => ({ family: 4 as Family, value })),
          v6Value.map((value) => ({ family: 6 as Family, value })),
        ),
        (ip) => {
          const text = formatIP(ip);
          const again = parseIP(text);
          assert.ok(again !== undefined);
          assert.equal(formatIP(again), text);
        },
      ),
      { numRuns: 500 },
    );
  });

  test('IPv6 text is the RFC 5952 canonical form that the URL serializer also produces', () => {
    fc.assert(
      fc.property(v6Value, (value) => {
        assert.equal(formatIP({ family: 6, value }), urlCanonical(value));
      }),
      { numRuns: 500 },
    );
  });

  test('every spelling of an IPv6 address parses to the same value', () => {
    // Full form with leading zeros, upper case, and the longest zero run compressed anywhere.
    fc.assert(
      fc.property(v6Value, fc.boolean(), (value, upper) => {
        const words = wordsOf(value);
        const padded = words.map((w) => w.toString(16).padStart(4, '0')).join(':');
        const spelled = upper ? padded.toUpperCase() : padded;
        assert.equal(v6(spelled), value);
        const canonical = formatIP({ family: 6, value });
        assert.equal(v6(upper ? canonical.toUpperCase() : canonical), value);
        // The last 32 bits written as a dotted quad.
        const head = words
          .slice(0, 6)
          .map((w) => w.toString(16))
          .join(':');
        const tail = formatIP({ family: 4, value: value & MAX_V4 });
        assert.equal(v6(`${head}:${tail}`), value);
      }),
      { numRuns: 300 },
    );
  });

  test('canonical IPv6 forms follow RFC 5952', () => {
    const cases: Array<[string, string]> = [
      ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
      ['0:0:0:0:0:0:0:0', '::'],
      ['0:0:0:0:0:0:0:1', '::1'],
      ['1:0:0:0:0:0:0:0', '1::'],
      // The longest run is compressed, not the first.
      ['fe80:0:0:1:0:0:0:1', 'fe80:0:0:1::1'],
      ['fe80::1:0:0:1', 'fe80::1:0:0:1'],
      // On a tie the leftmost run is compressed.
      ['1:0:0:1:0:0:1:1', '1::1:0:0:1:1'],
      ['0:0:1:0:0:1:0:0', '::1:0:0:1:0:0'],
      // A single zero group is never compressed.
      ['1:0:1:1:1:1:1:1', '1:0:1:1:1:1:1:1'],
      ['2001:DB8::ABCD', '2001:db8::abcd'],
      ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
      ['::2:3:4:5:6:7:8', '0:2:3:4:5:6:7:8'],
    ];
    for (const [input, canonical] of cases) {
      assert.equal(formatIP({ family: 6, value: v6(input) }), canonical, input);
    }
  });

  test('canonical IPv4 forms are plain dotted quads', () => {
    assert.equal(formatIP({ family: 4, value: 0n }), '0.0.0.0');
    assert.equal(formatIP({ family: 4, value: MAX_V4 }), '255.255.255.255');
    assert.equal(formatIP({ family: 4, value: v4('10.1.20.3') }), '10.1.20.3');
    assert.equal(v4('1.2.3.4'), 0x01020304n);
  });

  test('an IPv4-embedded IPv6 address parses to the mapped value', () => {
    assert.equal(v6('::ffff:1.2.3.4'), 0xffff01020304n);
    assert.equal(v6('::ffff:1.2.3.4'), v6('::ffff:102:304'));
    assert.equal(v6('64:ff9b::192.0.2.33'), v6('64:ff9b::c000:221'));
    assert.equal(v6('1:2:3:4:5:6:1.2.3.4'), v6('1:2:3:4:5:6:102:304'));
    assert.equal(v6('::1.2.3.4'), 0x01020304n);
  });

  test('malformed addresses are refused', () => {
    const malformed = [
      '',
      ' ',
      '010.0.0.1',
      '1.02.3.4',
      '256.0.0.1',
      '1.2.3.256',
      '1.2.3',
      '1.2.3.4.5',
      '1..2.3',
      '1.2.3.',
      '-1.2.3.4',
      '+1.2.3.4',
      '0x1.2.3.4',
      '１.2.3.4',
      ' 1.2.3.4',
      '1.2.3.4 ',
      '1.2.3.4/24',
      '1.2.3.4:80',
      '1:2:3:4:5:6:7:8:9',
      '1:2:3:4:5:6:7',
      '1:2:3:4:5:6:7:8::',
      '::1:2:3:4:5:6:7:8',
      ':::',
      '1::2::3',
      '::1::',
      ':1::',
      '1::2:',
      ':1:2:3:4:5:6:7:8',
      '1:2:3:4:5:6:7:8:',
      '12345::',
      'g::',
      'fe80::1%eth0',
      'fe80::1%1',
      ' ::1',
      '::1 ',
      '[::1]',
      '::ffff:1.2.3',
      '::ffff:01.2.3.4',
      '::ffff:256.2.3.4',
      '1.2.3.4::',
      '::1.2.3.4:5',
      '1:2:3:4:5:6:7:1.2.3.4',
      '::1:2:3:4:5:6:1.2.3.4',
      '0000:0000:0000:0000:0000:0000:0000:0000:0000',
    ];
    for (const text of malformed) assert.equal(parseIP(text), undefined, JSON.stringify(text));
  });

  test('a non-string input is refused rather than thrown on', () => {
    for (const value of [undefined, null, 1, {}, []]) assert.equal(parseIP(value as unknown as string), undefined);
  });

  test('whatever random text parses, it parses to an address that formats and parses back to itself', () => {
    const chars = fc.constantFrom(...'0123456789abcdefABCDEF:.%/ '.split(''));
    fc.assert(
      fc.property(fc.string({ unit: chars, maxLength: 24 }), (text) => {
        const ip = parseIP(text);
        if (ip === undefined) return;
        assert.ok(ip.value >= 0n && ip.value <= (ip.family === 4 ? MAX_V4 : MAX_V6));
        assert.ok(!/[%/ ]/.test(text));
        assert.deepEqual(parseIP(formatIP(ip)), ip);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('parseCidr', () => {
  test('prefix lengths are bounded by the family', () => {
    assert.deepEqual(parseCidr('10.0.0.0/32'), { address: { family: 4, value: 0x0a000000n }, length: 32 });
    assert.deepEqual(parseCidr('0.0.0.0/0'), { address: { family: 4, value: 0n }, length: 0 });
    assert.equal(parseCidr('10.0.0.0/33'), undefined);
    assert.deepEqual(parseCidr('::/128'), { address: { family: 6, value: 0n }, length: 128 });
    assert.equal(parseCidr('::/129'), undefined);
    assert.equal(parseCidr('fd00::/64')?.length, 64);
  });

  test('malformed CIDRs are refused', () => {
    const malformed = [
      '10.0.0.0',
      '10.0.0.0/',
      '/24',
      '10.0.0.0/024',
      '10.0.0.0/-1',
      '10.0.0.0/ 24',
      '10.0.0.0/24 ',
      '10.0.0.0/24/24',
      '10.0.0.0/1e1',
      '10.0.0/24',
      'fe80::1%eth0/64',
      '::/1000',
      '',
    ];
    for (const text of malformed) assert.equal(parseCidr(text), undefined, JSON.stringify(text));
  });

  test('the address keeps its host bits as written', () => {
    const cidr = parseCidr('10.0.0.5/24');
    assert.ok(cidr !== undefined);
    assert.equal(formatIP(cidr.address), '10.0.0.5');
    assert.equal(isNetwork(cidr), false);
    assert.equal(formatCidr(4, networkOf(cidr), cidr.length), '10.0.0.0/24');
  });
});

describe('CIDR arithmetic', () => {
  const anyCidr = fc.oneof(
    fc.record({ family: fc.constant(4 as Family), value: v4Value, length: fc.integer({ min: 0, max: 32 }) }),
    fc.record({ family: fc.constant(6 as Family), value: v6Value, length: fc.integer({ min: 0, max: 128 }) }),
  );

  test('networkOf and lastOf bound the address and span exactly 2^(bits - length) addresses', () => {
    fc.assert(
      fc.property(anyCidr, ({ family, value, length }) => {
        const cidr = { address: { family, value }, length };
        const net = networkOf(cidr);
        const last = lastOf(cidr);
        const bits = family === 4 ? 32n : 128n;
        assert.ok(net <= value && value <= last);
        assert.equal(last - net + 1n, 1n << (bits - BigInt(length)));
        assert.equal(net & hostMask(family, length), 0n);
        assert.equal(isNetwork(cidr), net === value);
        assert.equal(isNetwork({ address: { family, value: net }, length }), true);
        assert.ok(contains(cidr, { family, value: net }));
        assert.ok(contains(cidr, { family, value: last }));
        if (net > 0n) assert.equal(contains(cidr, { family, value: net - 1n }), false);
        if (last < (1n << bits) - 1n) assert.equal(contains(cidr, { family, value: last + 1n }), false);
      }),
      { numRuns: 500 },
    );
  });

  test('a CIDR formatted and parsed again names the same network', () => {
    fc.assert(
      fc.property(anyCidr, ({ family, value, length }) => {
        const text = formatCidr(family, value, length);
        assert.deepEqual(parseCidr(text), { address: { family, value }, length });
      }),
      { numRuns: 300 },
    );
  });

  test('worked examples of network, last address and membership', () => {
    const net24 = parseCidr('10.0.0.0/24');
    assert.ok(net24 !== undefined);
    assert.equal(isNetwork(net24), true);
    assert.equal(formatIP({ family: 4, value: lastOf(net24) }), '10.0.0.255');
    assert.equal(contains(net24, { family: 4, value: v4('10.0.0.77') }), true);
    assert.equal(contains(net24, { family: 4, value: v4('10.0.1.0') }), false);
    assert.equal(contains(net24, { family: 6, value: v4('10.0.0.77') }), false, 'another family is never contained');

    const net64 = parseCidr('fd00::/64');
    assert.ok(net64 !== undefined);
    assert.equal(formatIP({ family: 6, value: lastOf(net64) }), 'fd00::ffff:ffff:ffff:ffff');
    assert.equal(contains(net64, { family: 6, value: v6('fd00::1234') }), true);
    assert.equal(contains(net64, { family: 6, value: v6('fd00:0:0:1::') }), false);

    const odd = parseCidr('fd00::8/125');
    assert.ok(odd !== undefined);
    assert.equal(isNetwork(odd), true);
    assert.equal(isNetwork({ address: { family: 6, value: v6('fd00::9') }, length: 125 }), false);
  });
});

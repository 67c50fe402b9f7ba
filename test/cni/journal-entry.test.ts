/**
 * Journal entries: the file name is derived from the owner, is always a single safe path
 * component of at most 255 bytes, is injective (different owners never share a name, so no DEL
 * overwrites another's intent), and is refused for owners that could not be journaled;
 * decodeEntry accepts exactly what encodeEntry writes under the name journalFileName gives (or the
 * name an older plugin gave), and turns anything else into a reason, never an exception.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import type { Owner } from '../../src/ipam/allocation.ts';
import {
  JOURNAL_FORMAT,
  type JournalEntry,
  decodeEntry,
  encodeEntry,
  journalFileName,
  legacyJournalFileName,
  ownerProblem,
} from '../../src/cni/journal-entry.ts';

/** The names decodeEntry looks at: one safe path component, at most 255 bytes. */
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.~%-]{0,246}\.release$/;
const OWNER: Owner = { network: 'pods', containerID: 'c0ffee', ifname: 'eth0' };

function entryOf(
  owner: Owner,
  extra: { readonly [K in keyof JournalEntry]?: JournalEntry[K] | undefined } = {},
): JournalEntry {
  return {
    format: JOURNAL_FORMAT,
    ...owner,
    netns: '/var/run/netns/cni-1',
    recordedAt: 1_700_000_000_000,
    reason: 'agent unreachable',
    ...extra,
  } as JournalEntry;
}

/** A hand-made entry text, for fields encodeEntry would never write. */
function raw(fields: object): string {
  return JSON.stringify(fields);
}

function assertInvalid(name: string, text: string, reason?: RegExp): void {
  const decoded = decodeEntry(name, text);
  assert.equal(
    decoded.kind,
    'invalid',
    `expected ${JSON.stringify(text.slice(0, 200))} under ${JSON.stringify(name)} to be refused`,
  );
  if (reason !== undefined && decoded.kind === 'invalid') assert.match(decoded.reason, reason);
}

/** Owners ownerProblem accepts, leaning on the edges: long IDs, 15-unit multi-byte ifnames. */
const validContainerID = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$/),
  fc.stringMatching(/^[0-9a-f]{64}$/),
  fc.integer({ min: 1, max: 255 }).map((n) => 'a'.repeat(n)),
  fc.constantFrom('a'.repeat(100), 'b'.repeat(101), 'c'.repeat(255), 'a..b', 'x.', 'y-', 'z_'),
);
const validNetwork = fc.oneof(
  fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$/),
  fc.constantFrom('pods', 'n'.repeat(253)),
);
const threeByteChar = fc
  .integer({ min: 0x800, max: 0xffff })
  .filter((c) => c < 0xd800 || c > 0xdfff)
  .map((c) => String.fromCharCode(c));
const ifnamePattern = /^(?!\.{1,2}$)[^\s/:\0]{1,15}$/;
const validIfname = fc
  .oneof(
    fc.constantFrom('eth0', 'net1', 'e', '...', '%', '~', 'eth0.100', 'x'.repeat(15)),
    fc.string({ minLength: 1, maxLength: 15 }),
    fc.string({ minLength: 1, maxLength: 15, unit: 'binary' }),
    fc.string({ minLength: 1, maxLength: 15, unit: threeByteChar }),
    fc.constant('\u0800'.repeat(5)),
  )
  .filter((s) => ifnamePattern.test(s) && Buffer.byteLength(s) <= 15);
const validOwner: fc.Arbitrary<Owner> = fc.record({
  network: validNetwork,
  containerID: validContainerID,
  ifname: validIfname,
});

/**
 * Owners drawn from a few characters, "_", "." and "-" among them, so that pairs that differ only in
 * where a separator falls come up often; plus long IDs (over 100, up to 255) and long networks
 * sharing long prefixes, where names must be cut or digested.
 */
const nearID = fc.oneof(
  fc.stringMatching(/^[ab][ab_.-]{0,5}$/),
  fc
    .tuple(fc.integer({ min: 95, max: 250 }), fc.stringMatching(/^[ab_.-]{0,5}$/))
    .map(([n, tail]) => `${'a'.repeat(n)}${tail}`),
);
const nearNetwork = fc.oneof(
  fc.stringMatching(/^[ab][ab_.-]{0,5}$/),
  fc
    .tuple(fc.integer({ min: 150, max: 248 }), fc.stringMatching(/^[ab_.-]{0,5}$/))
    .map(([n, tail]) => `${'n'.repeat(n)}${tail}`),
);
const nearIfname = fc.stringMatching(/^[ab_.~%-]{1,6}$/).filter((s) => ifnamePattern.test(s));
const nearOwner: fc.Arbitrary<Owner> = fc.record({ network: nearNetwork, containerID: nearID, ifname: nearIfname });
/** So few owners that a sample holds many that differ only in where a "_" or "." falls. */
const tinyOwner: fc.Arbitrary<Owner> = fc.record({
  network: fc.constantFrom('n', 'n_a'),
  containerID: fc.stringMatching(/^a[a_.]{0,2}$/),
  ifname: fc.stringMatching(/^[a_.~]{1,2}$/).filter((s) => ifnamePattern.test(s)),
});
const anyOwner = fc.oneof(tinyOwner, nearOwner, validOwner);
const ownerKey = (o: Owner): string => JSON.stringify([o.network, o.containerID, o.ifname]);

describe('journalFileName', () => {
  test('names an ordinary owner "<id>~<ifname>~<network>.release"', () => {
    assert.equal(journalFileName(OWNER), 'c0ffee~eth0~pods.release');
    assert.equal(journalFileName({ ...OWNER }), journalFileName(OWNER), 'the same owner always gets the same name');
    const k8s = { network: 'k8s-pod-network', containerID: 'f'.repeat(64), ifname: 'eth0' };
    assert.equal(journalFileName(k8s), `${'f'.repeat(64)}~eth0~k8s-pod-network.release`);
  });

  test('ifname characters outside [A-Za-z0-9_.-] are percent-encoded', () => {
    const ifnameOf = (ifname: string): string => {
      const m = /^c0ffee~(.*)~pods\.release$/.exec(journalFileName({ ...OWNER, ifname }));
      assert.ok(m !== null);
      return m[1] ?? '';
    };
    assert.equal(ifnameOf('eth0'), 'eth0');
    assert.equal(ifnameOf('a_b.c-d'), 'a_b.c-d');
    assert.equal(ifnameOf('eth~0'), 'eth%7e0');
    assert.equal(ifnameOf('a%b'), 'a%25b');
    assert.equal(ifnameOf('*'), '%2a');
    assert.equal(ifnameOf('é'), '%c3%a9');
    assert.equal(ifnameOf('\\'), '%5c');
    assert.equal(ifnameOf('\u{1f600}'), '%f0%9f%98%80');
  });

  test('owners whose ID and ifname differ only in where "_" falls get different names, so neither DEL is lost (issue 10)', () => {
    const one = { network: 'pods', containerID: 'a_b', ifname: 'c' };
    const other = { network: 'pods', containerID: 'a', ifname: 'b_c' };
    assert.notEqual(journalFileName(one), journalFileName(other));
    assert.equal(
      decodeEntry(journalFileName(other), encodeEntry(entryOf(one))).kind,
      'invalid',
      "one's content is not taken under the other's name",
    );
  });

  test('networks whose 32-bit hashes are equal get different names, so neither DEL is lost (issue 10)', () => {
    // FNV-1a gives both 32-bit hashes the same value: the old names differed only there.
    assert.equal(
      legacyJournalFileName({ ...OWNER, network: 'net-162vu' }),
      legacyJournalFileName({ ...OWNER, network: 'net-1duea' }),
    );
    assert.notEqual(
      journalFileName({ ...OWNER, network: 'net-162vu' }),
      journalFileName({ ...OWNER, network: 'net-1duea' }),
    );
  });

  test('long container IDs sharing 64 characters and a 32-bit hash get different names, so neither DEL is lost (issue 10)', () => {
    const prefix = 'p'.repeat(64);
    const a = { ...OWNER, containerID: `${prefix}${'0'.repeat(36)}9pf8` };
    const b = { ...OWNER, containerID: `${prefix}${'0'.repeat(36)}arj6` };
    assert.equal(legacyJournalFileName(a), legacyJournalFileName(b), 'the old scheme cut both to one name');
    assert.notEqual(journalFileName(a), journalFileName(b));
  });

  test('an owner that fits is spelled out whole, long IDs included; one that does not is named by the sha256 of the whole owner', () => {
    const hundredOne = 'b'.repeat(101);
    assert.equal(journalFileName({ ...OWNER, containerID: hundredOne }), `${hundredOne}~eth0~pods.release`);
    const longest = { network: 'n'.repeat(253), containerID: 'z'.repeat(255), ifname: '\u0800'.repeat(5) };
    const digest = createHash('sha256')
      .update(JSON.stringify([longest.network, longest.containerID, longest.ifname]))
      .digest('hex');
    assert.equal(journalFileName(longest), `${'z'.repeat(64)}~${'%e0%a0%80'.repeat(5)}~~${digest}.release`);
    // The edge: 255 bytes exactly is spelled out, 256 is digested.
    const fits = { ...OWNER, network: 'n'.repeat(255 - 'c0ffee~eth0~.release'.length) };
    assert.equal(Buffer.byteLength(journalFileName(fits)), 255);
    assert.match(journalFileName({ ...fits, network: `${fits.network}n` }), /^c0ffee~eth0~~[0-9a-f]{64}\.release$/);
  });

  test('distinct owners get distinct names, of at most 255 bytes in the accepted pattern, that decode back to their entries', () => {
    fc.assert(
      fc.property(anyOwner, anyOwner, (a, b) => {
        const [na, nb] = [journalFileName(a), journalFileName(b)];
        if (ownerKey(a) === ownerKey(b)) assert.equal(na, nb);
        else assert.notEqual(na, nb, `${ownerKey(a)} and ${ownerKey(b)} share ${na}`);
        for (const [owner, name] of [
          [a, na],
          [b, nb],
        ] as const) {
          assert.ok(Buffer.byteLength(name) <= 255, `${name} is ${Buffer.byteLength(name)} bytes`);
          assert.match(name, SAFE_NAME);
          const entry = entryOf(owner);
          assert.deepEqual(decodeEntry(name, encodeEntry(entry)), { kind: 'entry', entry });
        }
      }),
      { numRuns: 3_000 },
    );
    // Many at once: a set of distinct owners gives as many names.
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.oneof(tinyOwner, nearOwner), { selector: ownerKey, minLength: 2, maxLength: 200 }),
        (owners) => {
          assert.equal(new Set(owners.map(journalFileName)).size, owners.length);
        },
      ),
      { numRuns: 200 },
    );
  });

  test('a name made now is never one an older plugin made, for any owner', () => {
    fc.assert(
      fc.property(anyOwner, anyOwner, (a, b) => {
        assert.notEqual(journalFileName(a), legacyJournalFileName(b));
      }),
      { numRuns: 2_000 },
    );
  });

  test('owners that cannot be journaled are refused, by ownerProblem and by a throw', () => {
    const bad: Array<[string, Owner]> = [];
    for (const containerID of [
      '',
      'a/b',
      '/abs',
      '../x',
      '..',
      '.',
      '.hidden',
      '-x',
      '_x',
      '~x',
      'a\0b',
      'a b',
      ' a',
      'a\n',
      'é',
      'a:b',
      'a%2fb',
      'a'.repeat(256),
    ]) {
      bad.push([`containerID ${JSON.stringify(containerID.slice(0, 20))}`, { ...OWNER, containerID }]);
    }
    for (const ifname of ['', 'a/b', '/', '../x', 'e\0', 'eth 0', ' eth0', 'eth0\n', '\t', 'a:b', 'x'.repeat(16)]) {
      bad.push([`ifname ${JSON.stringify(ifname)}`, { ...OWNER, ifname }]);
    }
    for (const network of ['', 'a/b', '..', '../x', '.net', 'a b', 'a\0', 'n'.repeat(254)]) {
      bad.push([`network ${JSON.stringify(network.slice(0, 20))}`, { ...OWNER, network }]);
    }
    for (const [what, owner] of bad) {
      assert.equal(typeof ownerProblem(owner), 'string', `${what} should have a problem`);
      assert.throws(() => journalFileName(owner), /cannot journal/, what);
    }
    assert.equal(ownerProblem(OWNER), undefined);
  });

  test('an ifname of "." or "..", or over 15 bytes, is refused as the spec refuses it', () => {
    for (const ifname of ['.', '..', '\u0800'.repeat(6)]) {
      assert.match(ownerProblem({ ...OWNER, ifname }) ?? '', /interface name/);
      assert.throws(() => journalFileName({ ...OWNER, ifname }));
    }
  });

  test('every name is one safe path component ending in .release, under 256 bytes, for any valid owner', () => {
    fc.assert(
      fc.property(validOwner, (owner) => {
        const name = journalFileName(owner);
        assert.match(name, SAFE_NAME);
        assert.ok(!name.includes('/') && !name.includes('\0'));
        assert.ok(Buffer.byteLength(name) <= 255, `${name} is ${Buffer.byteLength(name)} bytes`);
      }),
      { numRuns: 500 },
    );
  });

  test('every name journalFileName makes is one decodeEntry accepts', () => {
    fc.assert(
      fc.property(validOwner, fc.option(fc.string(), { nil: undefined }), (owner, netns) => {
        const entry = entryOf(owner, { netns });
        const decoded = decodeEntry(journalFileName(owner), encodeEntry(entry));
        assert.equal(decoded.kind, 'entry', JSON.stringify(decoded));
      }),
      { numRuns: 500 },
    );
  });

  test('a 100-character container ID with a 15-byte non-ASCII ifname round-trips (was refused as too long a name)', () => {
    // 5 three-byte characters encode to 45 characters; with a long ID the name used to exceed the
    // decoder's old 200-character limit, so the agent rejected the intent and leaked the address.
    for (const containerID of ['f'.repeat(64), 'a'.repeat(100), 'b'.repeat(255)]) {
      const owner = { network: 'n'.repeat(253), containerID, ifname: '\uffee'.repeat(5) };
      const decoded = decodeEntry(journalFileName(owner), encodeEntry(entryOf(owner)));
      assert.equal(decoded.kind, 'entry', `${containerID.length}: ${JSON.stringify(decoded)}`);
    }
  });
});

describe('decodeEntry', () => {
  const name = journalFileName(OWNER);
  const text = encodeEntry(entryOf(OWNER));

  test('accepts what encodeEntry wrote, with or without netns', () => {
    assert.deepEqual(decodeEntry(name, text), { kind: 'entry', entry: entryOf(OWNER) });
    const bare: JournalEntry = { format: JOURNAL_FORMAT, ...OWNER, recordedAt: 0, reason: '' };
    assert.deepEqual(decodeEntry(name, encodeEntry(bare)), { kind: 'entry', entry: bare });
    assert.ok(text.endsWith('\n'));
    assert.equal(decodeEntry(name, text.trimEnd()).kind, 'entry');
  });

  test('refuses empty, blank, truncated and garbage content', () => {
    assertInvalid(name, '', /empty/);
    for (const blank of [' ', '\n', '\t\r\n  ']) assertInvalid(name, blank, /empty/);
    for (let cut = 1; cut < text.trimEnd().length; cut++) assertInvalid(name, text.slice(0, cut));
    for (const garbage of [
      'hello',
      '{',
      '}',
      '{"format":1,',
      'format=1',
      '\0\0\0',
      '\ufeff{}',
      text.replace('{', '{{'),
    ])
      assertInvalid(name, garbage);
  });

  test('refuses JSON that is not an object', () => {
    for (const value of ['[]', '[1]', `[${text}]`, 'null', '42', '"text"', 'true'])
      assertInvalid(name, value, /not a JSON object/);
  });

  test('refuses another format number', () => {
    const base = entryOf(OWNER);
    for (const format of [0, 2, '1', null, 1.5, true]) assertInvalid(name, raw({ ...base, format }), /format/);
    const { format: _, ...noFormat } = base;
    assertInvalid(name, raw(noFormat), /format/);
  });

  test('refuses unknown fields', () => {
    const base = entryOf(OWNER);
    for (const key of ['extra', 'Network', 'address', '__proto__', 'constructor']) {
      assertInvalid(name, `${raw(base).slice(0, -1)},${JSON.stringify(key)}:1}`, /unknown field/);
    }
  });

  test('refuses missing or ill-typed fields', () => {
    const base = entryOf(OWNER);
    for (const key of ['network', 'containerID', 'ifname', 'reason', 'recordedAt'] as const) {
      const { [key]: _, ...missing } = base;
      assertInvalid(name, raw(missing), new RegExp(key));
      for (const wrong of [null, 1, true, [], {}]) {
        if (key === 'recordedAt' && typeof wrong === 'number') continue;
        assertInvalid(name, raw({ ...base, [key]: wrong }), new RegExp(key));
      }
    }
    assertInvalid(name, raw({ ...base, recordedAt: '1700000000000' }), /recordedAt/);
    assertInvalid(
      name,
      `${raw(base)
        .slice(0, -1)
        .replace(/"recordedAt":\d+/, '"recordedAt":1e400')}}`,
      /recordedAt/,
    );
    for (const netns of [null, 1, false, [], {}]) assertInvalid(name, raw({ ...base, netns }), /netns/);
  });

  test('keeps the monotonic stamp the plugin records, and still reads entries of older plugins that have none', () => {
    const stamped = entryOf(OWNER, { stamp: { boot: '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0', at: 8_123_456.789 } });
    assert.deepEqual(decodeEntry(name, encodeEntry(stamped)), { kind: 'entry', entry: stamped });
    const older = decodeEntry(name, text);
    assert.ok(older.kind === 'entry' && older.entry.stamp === undefined);
  });

  test('refuses a stamp that is not a boot ID and a monotonic reading, naming what is wrong', () => {
    const base = entryOf(OWNER);
    const boot = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0';
    for (const stamp of [
      null,
      1,
      'x',
      [],
      { at: 1 },
      { boot, at: '1' },
      { boot, at: -1 },
      { boot: '', at: 1 },
      { boot: '../x', at: 1 },
      { boot: 'b'.repeat(65), at: 1 },
      { boot, at: 1, extra: 2 },
    ]) {
      assertInvalid(name, raw({ ...base, stamp }), /stamp/);
    }
    assertInvalid(
      name,
      `${raw({ ...base, stamp: { boot, at: 1 } })
        .slice(0, -2)
        .replace(/"at":1$/, '"at":1e400')}}}`,
      /stamp\.at/,
    );
  });

  test('refuses content whose owner could not have been journaled', () => {
    for (const owner of [
      { ...OWNER, containerID: '../etc' },
      { ...OWNER, containerID: 'a/b' },
      { ...OWNER, ifname: 'a/b' },
      { ...OWNER, ifname: '' },
      { ...OWNER, network: '..' },
    ]) {
      assertInvalid(name, raw(entryOf(owner)), /not valid|container ID/);
    }
  });

  test('accepts a file named as older plugins named it, so an intent recorded before an upgrade is still released', () => {
    const owners: Owner[] = [
      OWNER,
      { ...OWNER, ifname: 'a%b~' },
      { ...OWNER, containerID: 'f'.repeat(150) },
      { network: 'n'.repeat(253), containerID: 'z'.repeat(255), ifname: '\u0800'.repeat(5) },
    ];
    for (const owner of owners) {
      const legacy = legacyJournalFileName(owner);
      assert.match(legacy, /^[^~]*(~[0-9a-f]{8}_[^~]*)?\.release$/, 'old names hold at most one "~"');
      assert.deepEqual(decodeEntry(legacy, encodeEntry(entryOf(owner))), { kind: 'entry', entry: entryOf(owner) });
    }
    assert.match(legacyJournalFileName(OWNER), /^c0ffee_eth0_[0-9a-f]{8}\.release$/);
    assertInvalid(legacyJournalFileName({ ...OWNER, ifname: 'eth1' }), text, /does not match/);
  });

  test('refuses a name that does not match the content', () => {
    const others: Owner[] = [
      { ...OWNER, containerID: 'c0ffef' },
      { ...OWNER, ifname: 'eth1' },
      { ...OWNER, network: 'other' },
    ];
    for (const other of others) {
      assertInvalid(journalFileName(other), text, /does not match/);
      assertInvalid(name, encodeEntry(entryOf(other)), /does not match/);
    }
  });

  test('refuses names that are not a journal entry name: "..", "/", dot-files, other suffixes', () => {
    for (const bad of [
      '',
      '.release',
      '..release',
      `..${name}`,
      `../${name}`,
      `./${name}`,
      `a/${name}`,
      `${name}/`,
      `/${name}`,
      `.${name}`,
      `${name}.tmp`,
      `${name}\n`,
      `${name}\0`,
      `${name.slice(0, -'.release'.length)}`,
      `${name.slice(0, -'.release'.length)}.Release`,
      name.replace('~eth0~', '~eth 0~'),
      `${'a'.repeat(248)}.release`,
      `${'x'.repeat(300)}.release`,
    ]) {
      assertInvalid(bad, text);
    }
  });

  test('arbitrary names and texts never throw, and give an entry only under its own name', () => {
    const nameArb = fc.oneof(
      fc.constant(name),
      fc.string(),
      fc.string({ unit: 'binary', maxLength: 300 }),
      fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.~%-]{0,60}\.release$/),
    );
    const textArb = fc.oneof(
      fc.string(),
      fc.string({ unit: 'binary' }),
      fc.json(),
      fc.jsonValue().map((v) => JSON.stringify(v)),
      fc
        .record(
          {
            format: fc.constantFrom(1, 2, '1'),
            network: fc.constantFrom('pods', 1),
            containerID: fc.constantFrom('c0ffee', '../x'),
            ifname: fc.constantFrom('eth0', ''),
            recordedAt: fc.constantFrom(0, '0'),
            reason: fc.string(),
          },
          { requiredKeys: [] },
        )
        .map(raw),
      // A valid text with a few characters replaced, deleted or duplicated.
      fc
        .tuple(fc.nat(text.length), fc.nat(3), fc.string({ maxLength: 3, unit: 'binary' }))
        .map(([at, cut, insert]) => text.slice(0, at) + insert + text.slice(at + cut)),
    );
    fc.assert(
      fc.property(nameArb, textArb, (n, t) => {
        const decoded = decodeEntry(n, t);
        assert.ok(decoded.kind === 'entry' || decoded.kind === 'invalid');
        if (decoded.kind === 'entry')
          assert.ok(journalFileName(decoded.entry) === n || legacyJournalFileName(decoded.entry) === n, n);
        else assert.equal(typeof decoded.reason, 'string');
      }),
      { numRuns: 2_000 },
    );
  });
});

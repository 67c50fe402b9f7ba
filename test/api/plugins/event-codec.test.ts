/**
 * The `warren.event-source` v1 codec: what an adapter's events and listings must look like before
 * Warren acts on them, and that no bytes at all can make the decoders throw.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decodeEvent, decodeListing, encodeEvent, encodeListing } from '../../../src/api/plugins/event-codec.ts';
import { EVENT_KIND, MESSAGES, type RuntimeEvent } from '../../../src/api/plugins/wire.ts';

const HEX64 = 'a'.repeat(32) + '0123456789abcdef'.repeat(2);

/** An Event message with any field values, written with protobufjs (unknown enum numbers too). */
function rawEvent(fields: { id?: string; kind?: number; netns?: string; time_unix_ms?: number | string }): Uint8Array {
  return MESSAGES.Event.encode(MESSAGES.Event.create(fields)).finish();
}

function reasonOf(bytes: Uint8Array): string {
  const d = decodeEvent(bytes);
  assert.equal(d.kind, 'malformed', JSON.stringify(d));
  return d.kind === 'malformed' ? d.reason : '';
}

const validEvent: fc.Arbitrary<RuntimeEvent> = fc
  .record(
    {
      id: fc.stringMatching(/^[A-Za-z0-9_.:-]{1,128}$/),
      kind: fc.constantFrom('created' as const, 'exited' as const, 'deleted' as const),
      netns: fc
        .array(
          fc.stringMatching(/^[A-Za-z0-9_.-]{1,12}$/).filter((c) => c !== '..'),
          { minLength: 1, maxLength: 5 },
        )
        .map((cs) => `/${cs.join('/')}`),
      time: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
    },
    { requiredKeys: ['id', 'kind', 'time'] },
  )
  .map((e) => ({ ...e })); // fast-check's records have no prototype; decoded events do

describe('decodeEvent', () => {
  it('reads a podman-style event with a 64-hex id and its netns', () => {
    const event: RuntimeEvent = { id: HEX64, kind: 'deleted', netns: '/run/netns/netns-1234', time: 1_700_000_000_000 };
    assert.deepEqual(decodeEvent(encodeEvent(event)), { kind: 'event', event });
  });

  it('reads an event without a netns as having none', () => {
    assert.deepEqual(decodeEvent(encodeEvent({ id: 'c1', kind: 'exited', time: 5 })), {
      kind: 'event',
      event: { id: 'c1', kind: 'exited', time: 5 },
    });
  });

  it('reads a heartbeat, whatever else it carries', () => {
    assert.deepEqual(decodeEvent(encodeEvent({ kind: 'heartbeat' })), { kind: 'heartbeat' });
    assert.deepEqual(decodeEvent(rawEvent({ kind: EVENT_KIND.HEARTBEAT, id: '' })), { kind: 'heartbeat' });
  });

  it('refuses bytes that are not protobuf, saying so', () => {
    assert.match(reasonOf(new Uint8Array([0x0a, 0xff, 0xff, 0xff])), /not a protobuf Event message/);
    assert.match(reasonOf(new Uint8Array([0xff])), /not a protobuf Event message/);
  });

  it('refuses an unspecified or unknown kind, naming the number', () => {
    assert.match(reasonOf(new Uint8Array(0)), /kind is unspecified \(0\)/);
    assert.match(reasonOf(rawEvent({ id: 'c1', kind: 9, time_unix_ms: 1 })), /kind 9 is unknown/);
    assert.match(reasonOf(rawEvent({ id: 'c1', kind: -3, time_unix_ms: 1 })), /kind -3 is unknown/);
  });

  it('refuses an empty, oversized or non-printable id', () => {
    assert.match(
      reasonOf(rawEvent({ id: '', kind: EVENT_KIND.DELETED, time_unix_ms: 1 })),
      /deleted event: id is empty/,
    );
    assert.match(
      reasonOf(rawEvent({ id: 'x'.repeat(129), kind: EVENT_KIND.DELETED, time_unix_ms: 1 })),
      /id is 129 characters long/,
    );
    assert.match(
      reasonOf(rawEvent({ id: 'a\nb', kind: EVENT_KIND.CREATED, time_unix_ms: 1 })),
      /id "a\\nb" has characters other than/,
    );
    assert.match(
      reasonOf(rawEvent({ id: 'a/b', kind: EVENT_KIND.CREATED, time_unix_ms: 1 })),
      /has characters other than/,
    );
    assert.equal(
      decodeEvent(rawEvent({ id: 'x'.repeat(128), kind: EVENT_KIND.CREATED, time_unix_ms: 1 })).kind,
      'event',
    );
  });

  it('refuses a netns that is relative, contains NUL or a ".." component', () => {
    const netns = (path: string) =>
      reasonOf(rawEvent({ id: 'c1', kind: EVENT_KIND.EXITED, netns: path, time_unix_ms: 1 }));
    assert.match(netns('run/netns/x'), /exited event for c1: netns "run\/netns\/x" is not absolute/);
    assert.match(netns('/run/netns/x\0y'), /contains NUL/);
    assert.match(netns('/run/netns/../../etc'), /has a "\.\." component/);
    assert.equal(
      decodeEvent(rawEvent({ id: 'c1', kind: EVENT_KIND.EXITED, netns: '/run/netns/a..b', time_unix_ms: 1 })).kind,
      'event',
      '".." inside a name is a name',
    );
  });

  it('refuses a time that is not a positive safe integer', () => {
    assert.match(
      reasonOf(rawEvent({ id: 'c1', kind: EVENT_KIND.CREATED })),
      /time_unix_ms 0 is not a positive safe integer/,
    );
    assert.match(
      reasonOf(rawEvent({ id: 'c1', kind: EVENT_KIND.CREATED, time_unix_ms: -5 })),
      /time_unix_ms -5 is not/,
    );
    assert.match(
      reasonOf(rawEvent({ id: 'c1', kind: EVENT_KIND.CREATED, time_unix_ms: '9007199254740993' })),
      /time_unix_ms 9007199254740993 is not/,
    );
    assert.equal(
      decodeEvent(rawEvent({ id: 'c1', kind: EVENT_KIND.CREATED, time_unix_ms: Number.MAX_SAFE_INTEGER })).kind,
      'event',
    );
  });

  it('never throws on arbitrary bytes and answers one of its three shapes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 96 }), (bytes) => {
        const d = decodeEvent(bytes);
        switch (d.kind) {
          case 'event':
            assert.ok(d.event.id.length > 0 && d.event.time > 0);
            break;
          case 'heartbeat':
            break;
          case 'malformed':
            assert.ok(d.reason.length > 0);
            break;
          default: {
            const never: never = d;
            assert.fail(`unexpected ${JSON.stringify(never)}`);
          }
        }
      }),
      { numRuns: 5_000 },
    );
  });

  it('round-trips every valid event', () => {
    fc.assert(
      fc.property(validEvent, (event) => {
        assert.deepEqual(decodeEvent(encodeEvent(event)), { kind: 'event', event });
      }),
      { numRuns: 2_000 },
    );
  });

  it('never throws on well-formed messages with any field values, and accepts only valid ones', () => {
    fc.assert(
      fc.property(
        fc.record({
          id: fc.oneof(fc.string({ maxLength: 140 }), fc.string({ unit: 'binary', maxLength: 20 }), fc.constant(HEX64)),
          kind: fc.oneof(fc.integer({ min: -2, max: 6 }), fc.integer()),
          netns: fc.oneof(fc.string({ maxLength: 30 }), fc.constantFrom('', '/run/netns/x', '/a/../b', '/a/\0', 'rel')),
          time_unix_ms: fc.oneof(fc.integer(), fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String)),
        }),
        (fields) => {
          const d = decodeEvent(rawEvent(fields));
          if (d.kind === 'event') {
            assert.match(d.event.id, /^[A-Za-z0-9_.:-]{1,128}$/);
            assert.ok(Number.isSafeInteger(d.event.time) && d.event.time > 0);
            if (d.event.netns !== undefined) assert.ok(d.event.netns.startsWith('/') && !d.event.netns.includes('\0'));
          } else if (d.kind === 'heartbeat') {
            assert.equal(fields.kind, EVENT_KIND.HEARTBEAT);
          } else {
            assert.ok(d.reason.length > 0);
          }
        },
      ),
      { numRuns: 3_000 },
    );
  });
});

describe('decodeListing', () => {
  it('reads ids and prefixes, removing duplicates', () => {
    const bytes = encodeListing({
      ids: [HEX64, 'b', HEX64],
      netnsPrefixes: ['/run/netns/netns-', '/var/run/netns/', '/run/netns/netns-'],
    });
    assert.deepEqual(decodeListing(bytes), {
      ids: [HEX64, 'b'],
      netnsPrefixes: ['/run/netns/netns-', '/var/run/netns/'],
    });
    assert.deepEqual(decodeListing(new Uint8Array(0)), { ids: [], netnsPrefixes: [] });
  });

  it('refuses a whole listing over one bad id, naming it', () => {
    assert.match(decodeListing(encodeListing({ ids: ['a', ''], netnsPrefixes: [] })) as string, /ids\[1\] is empty/);
    assert.match(
      decodeListing(encodeListing({ ids: ['a b'], netnsPrefixes: [] })) as string,
      /ids\[0\] "a b" has characters/,
    );
  });

  it('refuses a whole listing over one prefix that would claim too much or is not normalised', () => {
    const refused = (prefix: string) =>
      decodeListing(encodeListing({ ids: ['a'], netnsPrefixes: ['/run/netns/netns-', prefix] }));
    assert.match(refused('/') as string, /netns_prefixes\[1\] "\/" has fewer than two components/);
    assert.match(refused('/run') as string, /fewer than two components/);
    assert.match(refused('/run/') as string, /fewer than two components/);
    assert.match(refused('run/netns') as string, /is not absolute/);
    assert.match(refused('/run//netns') as string, /not normalised \(it has "\/\/"\)/);
    assert.match(refused('/run/./netns') as string, /not normalised \(it has a "\." component\)/);
    assert.match(refused('/run/../netns') as string, /has a "\.\." component/);
    assert.match(refused('/run/ne\0ts') as string, /contains NUL/);
    assert.equal(typeof refused('/run/netns/'), 'object');
  });

  it('refuses bytes that are not protobuf', () => {
    assert.match(
      decodeListing(new Uint8Array([0x0a, 0xff, 0xff])) as string,
      /^listing: not a protobuf ListResponse message/,
    );
  });

  it('never throws on arbitrary bytes or field values', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 96 }), (bytes) => {
        const l = decodeListing(bytes);
        assert.ok(typeof l === 'string' || (Array.isArray(l.ids) && Array.isArray(l.netnsPrefixes)));
      }),
      { numRuns: 3_000 },
    );
    fc.assert(
      fc.property(
        fc.array(fc.string({ maxLength: 20 }), { maxLength: 5 }),
        fc.array(fc.string({ maxLength: 20 }), { maxLength: 3 }),
        (ids, netnsPrefixes) => {
          const l = decodeListing(encodeListing({ ids, netnsPrefixes }));
          if (typeof l !== 'string') {
            assert.equal(new Set(l.ids).size, l.ids.length);
            for (const p of l.netnsPrefixes) assert.ok(p.startsWith('/') && !p.includes('//'));
          }
        },
      ),
      { numRuns: 2_000 },
    );
  });
});

/**
 * The decoder of `podman events --format json` lines: real lines captured from Debian's podman
 * 4.3.1 (file events logger) as tables, what each kind of bad line is called, RFC 3339 times, and
 * fuzzing — no string and no JSON value makes it throw, and whatever it accepts is an event Warren
 * accepts on the wire (api/plugins/event-codec.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decodeEvent, encodeEvent } from '../../../../src/api/plugins/event-codec.ts';
import { CONTAINER_ID, decodePodmanEvent, parseRfc3339 } from '../../../../src/cli/adapters/podman/podman-events.ts';

const A = 'c4eaaf63d6ba1ccca7157dd63b58eccf573e508adeb912649a011591278d5e44';
const B = '0e74ac942810a4584d1826470fd92432e84cc1c0bea98d81e5cfd0340cdbb51f';

/** Captured with `podman events --format json` while running, stopping and removing two containers. */
const CAPTURED: ReadonlyArray<readonly [string, ReturnType<typeof decodePodmanEvent>['kind'], string?, number?]> = [
  [
    `{"ID":"${A}","Image":"localhost/warren/busybox:latest","Name":"exp1","Status":"create","Time":"2026-11-22T13:58:14.276346613Z","Type":"container","Attributes":{}}`,
    'event',
    'created',
    Date.UTC(2026, 10, 22, 13, 58, 14, 276),
  ],
  [
    `{"ID":"${A}","Image":"localhost/warren/busybox:latest","Name":"exp1","Status":"init","Time":"2026-11-22T13:58:14.360934735Z","Type":"container","Attributes":{}}`,
    'ignored',
  ],
  [
    `{"ID":"${A}","Image":"localhost/warren/busybox:latest","Name":"exp1","Status":"start","Time":"2026-11-22T13:58:14.367655149Z","Type":"container","Attributes":{}}`,
    'ignored',
  ],
  [
    `{"ID":"${B}","Image":"localhost/warren/busybox:latest","Name":"exp2","Status":"died","Time":"2026-11-22T13:58:18.59265081Z","Type":"container","Attributes":{}}`,
    'event',
    'exited',
    Date.UTC(2026, 10, 22, 13, 58, 18, 592),
  ],
  [
    `{"ID":"${B}","Image":"localhost/warren/busybox:latest","Name":"exp2","Status":"cleanup","Time":"2026-11-22T13:58:18.63774615Z","Type":"container","Attributes":{}}`,
    'ignored',
  ],
  [
    `{"ContainerExitCode":137,"ID":"${A}","Image":"localhost/warren/busybox:latest","Name":"exp1","Status":"died","Time":"2026-11-22T13:58:20.687421576Z","Type":"container","Attributes":{}}`,
    'event',
    'exited',
    Date.UTC(2026, 10, 22, 13, 58, 20, 687),
  ],
  [
    `{"ID":"${A}","Image":"localhost/warren/busybox:latest","Name":"exp1","Status":"remove","Time":"2026-11-22T13:58:20.766162248Z","Type":"container","Attributes":{}}`,
    'event',
    'deleted',
    Date.UTC(2026, 10, 22, 13, 58, 20, 766),
  ],
  [
    '{"Name":"localhost/warren/busybox:latest","Status":"pull","Time":"2026-11-22T13:58:14.253998275Z","Type":"image","Attributes":null}',
    'ignored',
  ],
  [
    '{"ID":"7a3249dc42e4953b568f5d3beb441f48f6a0a94a7d127aa64f132688e0e7d0b0","Name":"localhost/warren/busybox:latest","Status":"tag","Time":"2026-11-22T13:58:10.361967622Z","Type":"image","Attributes":null}',
    'ignored',
  ],
  ['{"Status":"refresh","Time":"2026-11-22T13:58:10.289148273Z","Type":"system","Attributes":null}', 'ignored'],
];

describe('decoding real podman 4.3 event lines', () => {
  for (const [line, kind, eventKind, time] of CAPTURED) {
    const status = JSON.parse(line) as { Type: string; Status: string };
    it(`a ${status.Type} ${status.Status} line is ${eventKind ?? kind}`, () => {
      const decoded = decodePodmanEvent(line);
      assert.equal(decoded.kind, kind, JSON.stringify(decoded));
      if (decoded.kind === 'event') {
        const id = (JSON.parse(line) as { ID: string }).ID;
        assert.deepEqual(decoded.event, { id, kind: eventKind, time });
      }
    });
  }

  it('an ignored line still says when it happened, so a follower can move past it', () => {
    const decoded = decodePodmanEvent(CAPTURED[1]?.[0] ?? '');
    assert.deepEqual(decoded, {
      kind: 'ignored',
      reason: 'container status "init"',
      time: Date.UTC(2026, 10, 22, 13, 58, 14, 360),
    });
  });
});

describe('what a bad line is called', () => {
  const line = (over: Record<string, unknown>): string =>
    JSON.stringify({
      ID: A,
      Name: 'x',
      Status: 'remove',
      Time: '2026-11-22T13:58:20.766162248Z',
      Type: 'container',
      Attributes: {},
      ...over,
    });
  const cases: ReadonlyArray<readonly [string, string, 'malformed' | 'ignored', RegExp]> = [
    ['an empty line', '', 'malformed', /not JSON/],
    ['a line cut in half', line({}).slice(0, 40), 'malformed', /not JSON/],
    ['a JSON array', '[1,2]', 'malformed', /not a JSON object/],
    ['JSON null', 'null', 'malformed', /not a JSON object/],
    ['a JSON string', '"remove"', 'malformed', /not a JSON object/],
    ['an object without Type', JSON.stringify({ ID: A, Status: 'remove' }), 'malformed', /no Type/],
    ['a container event without Status', line({ Status: undefined }), 'malformed', /without a Status/],
    ['a short ID', line({ ID: A.slice(0, 12) }), 'malformed', /not a full container ID/],
    ['an upper-case ID', line({ ID: A.toUpperCase() }), 'malformed', /not a full container ID/],
    ['a numeric ID', line({ ID: 12 }), 'malformed', /not a full container ID/],
    ['a missing Time', line({ Time: undefined }), 'malformed', /no Time/],
    ['a Time that is not RFC 3339', line({ Time: 'yesterday' }), 'malformed', /not an RFC 3339 time/],
    ['a Time on February 30th', line({ Time: '2026-02-30T00:00:00Z' }), 'malformed', /not an RFC 3339 time/],
    ['Go zero time', line({ Time: '0001-01-01T00:00:00Z' }), 'malformed', /not after 1970/],
    ['the epoch itself', line({ Time: '1970-01-01T00:00:00Z' }), 'malformed', /not after 1970/],
    ['an unknown container status', line({ Status: 'exploded' }), 'ignored', /"exploded"/],
    ['a status whose name is an Object method', line({ Status: 'toString' }), 'ignored', /"toString"/],
    ['a volume event', line({ Type: 'volume', Status: 'remove' }), 'ignored', /"volume" event/],
  ];
  for (const [what, text, kind, reason] of cases) {
    it(`${what} is ${kind}`, () => {
      const decoded = decodePodmanEvent(text);
      assert.ok(decoded.kind !== 'event', JSON.stringify(decoded));
      assert.equal(decoded.kind, kind);
      assert.match(decoded.reason, reason);
    });
  }

  it('a reason quotes at most the start of a long line', () => {
    const decoded = decodePodmanEvent(`x${'y'.repeat(100_000)}`);
    assert.ok(decoded.kind === 'malformed' && decoded.reason.length < 200);
  });

  it('a numeric time (unix seconds or timeNano) is accepted when there is no Time string', () => {
    // biome-ignore lint/correctness/noPrecisionLoss: podman writes timeNano as a JSON number past 2^53
    const timeNano = 1_795_355_900_766_162_248;
    assert.deepEqual(decodePodmanEvent(line({ Time: undefined, time: 1_795_355_900, timeNano })), {
      kind: 'event',
      event: { id: A, kind: 'deleted', time: 1_795_355_900_766 },
    });
    assert.deepEqual(decodePodmanEvent(line({ Time: undefined, time: 1_795_355_900 })), {
      kind: 'event',
      event: { id: A, kind: 'deleted', time: 1_795_355_900_000 },
    });
  });
});

describe('RFC 3339 times', () => {
  it('reads Go RFC3339Nano in UTC and with offsets, truncating to milliseconds', () => {
    assert.equal(parseRfc3339('2026-11-22T13:58:18.59265081Z'), Date.UTC(2026, 10, 22, 13, 58, 18, 592));
    assert.equal(parseRfc3339('2026-11-22T13:58:18Z'), Date.UTC(2026, 10, 22, 13, 58, 18));
    assert.equal(parseRfc3339('2026-11-22T14:58:18.5+01:00'), Date.UTC(2026, 10, 22, 13, 58, 18, 500));
    assert.equal(parseRfc3339('2026-11-22T08:28:18.999999999-05:30'), Date.UTC(2026, 10, 22, 13, 58, 18, 999));
  });

  it('reads Go zero time as year 1, not 1901', () => {
    assert.equal(new Date(parseRfc3339('0001-01-01T00:00:00Z') ?? Number.NaN).getUTCFullYear(), 1);
  });

  it('refuses what is not a time', () => {
    for (const text of [
      '',
      '2026-11-22',
      '2026-11-22 13:58:18Z',
      '2026-13-01T00:00:00Z',
      '2026-11-22T24:00:00Z',
      '2026-11-22T13:58:18.Z',
      '2026-11-22T13:58:18.1234567890Z',
      '2026-11-22T13:58:18+1:00',
    ])
      assert.equal(parseRfc3339(text), undefined, text);
  });

  it('agrees with Date.parse on every millisecond-precision ISO time', () => {
    fc.assert(
      fc.property(
        fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2200-01-01T00:00:00Z'), noInvalidDate: true }),
        (d) => {
          assert.equal(parseRfc3339(d.toISOString()), d.getTime());
        },
      ),
    );
  });
});

describe('fuzzing the decoder', () => {
  const checkResult = (decoded: ReturnType<typeof decodePodmanEvent>): void => {
    switch (decoded.kind) {
      case 'event':
        assert.match(decoded.event.id, CONTAINER_ID);
        assert.ok(['created', 'exited', 'deleted'].includes(decoded.event.kind));
        assert.ok(Number.isSafeInteger(decoded.event.time) && decoded.event.time > 0);
        assert.equal(decoded.event.netns, undefined);
        // Whatever the decoder accepts, Warren accepts on the wire as it is.
        assert.deepEqual(decodeEvent(encodeEvent(decoded.event)), { kind: 'event', event: decoded.event });
        break;
      case 'ignored':
      case 'malformed':
        assert.equal(typeof decoded.reason, 'string');
        assert.ok(decoded.reason.length > 0);
        break;
      default: {
        const never: never = decoded;
        assert.fail(`unknown decoding ${JSON.stringify(never)}`);
      }
    }
  };

  it('never throws on any string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 400 }), (s) => checkResult(decodePodmanEvent(s))),
      { numRuns: 2_000 },
    );
  });

  it('never throws on any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => checkResult(decodePodmanEvent(JSON.stringify(v)))),
      { numRuns: 2_000 },
    );
  });

  it('never throws on podman-shaped objects with arbitrary fields', () => {
    const field = fc.oneof(
      fc.jsonValue(),
      fc.constantFrom(A, 'create', 'died', 'remove', 'container', '2026-11-22T13:58:18.59265081Z', undefined),
    );
    const shaped = fc.record(
      {
        ID: field,
        Status: fc.oneof(
          fc.constantFrom('create', 'died', 'remove', 'start', '__proto__', 'constructor'),
          fc.jsonValue(),
        ),
        Type: fc.oneof(fc.constant('container'), fc.jsonValue()),
        Time: field,
        time: field,
        timeNano: field,
        Attributes: field,
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(shaped, (o) => checkResult(decodePodmanEvent(JSON.stringify(o)))),
      { numRuns: 3_000 },
    );
  });

  it('decodes every well-formed create, died and remove line to its event', () => {
    const hex64 = fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 64, maxLength: 64 });
    const when = fc.date({
      min: new Date('2000-01-01T00:00:00Z'),
      max: new Date('2100-01-01T00:00:00Z'),
      noInvalidDate: true,
    });
    const status = fc.constantFrom(['create', 'created'], ['died', 'exited'], ['remove', 'deleted']);
    fc.assert(
      fc.property(hex64, when, status, fc.string(), (id, date, [s, kind], name) => {
        const line = JSON.stringify({
          ID: id,
          Image: 'i',
          Name: name,
          Status: s,
          Time: date.toISOString(),
          Type: 'container',
          Attributes: { name },
        });
        const decoded = decodePodmanEvent(line);
        assert.deepEqual(decoded, { kind: 'event', event: { id, kind, time: date.getTime() } });
        checkResult(decoded);
      }),
    );
  });
});

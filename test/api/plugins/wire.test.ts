/**
 * The registration handshake's messages: round trips, and bytes that are not a message refused
 * with what is wrong, whether they arrive as a Node Buffer (as gRPC hands them over) or not.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decodeInfo, decodeStatus, encodeInfo, encodeStatus } from '../../../src/api/plugins/wire.ts';

describe('the registration wire', () => {
  it('round-trips a PluginInfo and a RegistrationStatus', () => {
    const info = { type: 'warren.event-source', name: 'podman', endpoint: '', supportedVersions: ['v1', 'v2'] };
    assert.deepEqual(decodeInfo(encodeInfo(info)), info);
    assert.deepEqual(decodeStatus(encodeStatus({ registered: false, error: 'no version in common' })), {
      registered: false,
      error: 'no version in common',
    });
  });

  it('refuses a string field that runs past the end of a Buffer instead of cutting it short', () => {
    // Field 1 (type), length 255, and one byte of it: protobufjs' Buffer reader would answer "".
    for (const bytes of [Buffer.from([0x0a, 0xff, 0x01]), new Uint8Array([0x0a, 0xff, 0x01])]) {
      assert.match(String(decodeInfo(bytes)), /^PluginInfo does not decode: index out of range/);
    }
    // Field 2 of RegistrationStatus (error) the same way.
    assert.match(
      String(decodeStatus(Buffer.from([0x12, 0xff, 0x01]))),
      /^RegistrationStatus does not decode: index out of range/,
    );
    const whole = encodeInfo({ type: 'warren.event-source', name: 'podman', endpoint: '', supportedVersions: ['v1'] });
    assert.equal(typeof decodeInfo(whole.subarray(0, whole.length - 1)), 'string', 'a message missing its last byte');
  });

  it('never throws on arbitrary bytes, in a Buffer or not', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.boolean(), (raw, asBuffer) => {
        const bytes = asBuffer ? Buffer.from(raw) : raw;
        const info = decodeInfo(bytes);
        const status = decodeStatus(bytes);
        assert.ok(typeof info === 'string' || Array.isArray(info.supportedVersions));
        assert.ok(typeof status === 'string' || typeof status.registered === 'boolean');
      }),
      { numRuns: 2000 },
    );
  });
});

/**
 * The CNI wire's one definition (src/api/cni-wire.ts) against its vector file and its TypeScript
 * codecs: the file is what the definition generates (so the C forwarder, which is checked against
 * the file in test/plugin/cni-wire-c.test.ts, is held to the definition); the plugin's encoder
 * writes each vector's body; the agent takes each apart into the vector's variables and config,
 * accepts exactly the envelope's fields, and answers a forwarded call with the definition's head.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { callCni, cniRequestText } from '../../src/api/cni-call.ts';
import {
  CONFIG_FIELD,
  ENVELOPE,
  type EnvelopeField,
  forwardedAnswerHeaders,
  forwardedRequest,
} from '../../src/api/cni-wire.ts';
import type { CniRequest } from '../../src/api/protocol.ts';
import { splitCniRequest } from '../../src/api/forwarded-call.ts';
import { stdoutOf } from '../../src/api/cni-stdout.ts';
import type { CniEnv } from '../../src/cni/args.ts';
import { versionResult } from '../../src/cni/spec.ts';
import { VECTORS_FILE, answerVectors, requestVectors, vectorsText } from './cni-wire-vectors.ts';
import { type Harness, harness } from './harness.ts';

/** A sent vector's body: its bytes after the head. */
function bodyOf(sends: Buffer): Buffer {
  return sends.subarray(sends.indexOf('\r\n\r\n') + 4);
}

/** The envelope's fields a vector's variables give, as the definition maps them (args "" when unset). */
function fieldsOf(variables: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const { field, variable, always } of ENVELOPE) {
    const value = variables[variable] ?? (always ? '' : undefined);
    if (value !== undefined) fields[field] = value;
  }
  return fields;
}

const sent = requestVectors().filter((v) => v.sends !== undefined);

/** True only when A and B are the same union: a field added to one and not the other fails to compile. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const envelopeIsTheRequestType: Same<EnvelopeField | typeof CONFIG_FIELD, keyof CniRequest> = true;

describe('the CNI wire: one definition, its vector file and its TypeScript codecs', () => {
  it('the vector file is what src/api/cni-wire.ts generates, so the definition and the file cannot drift apart', () => {
    const generated = vectorsText();
    const file = readFileSync(VECTORS_FILE, 'utf8');
    if (file === generated) return;
    const lines = [file.split('\n'), generated.split('\n')] as const;
    const at = lines[0].findIndex((line, i) => line !== lines[1][i]);
    assert.fail(
      `${VECTORS_FILE} differs from the definition at line ${at + 1}; regenerate it with ` +
        '`node test/api/cni-wire-vectors.ts --write` if the wire changed on purpose, ' +
        'and rebuild the forwarder to match',
    );
  });

  it("the envelope's fields and the config are the fields of CniRequest (protocol.ts), checked by the compiler", () => {
    assert.equal(envelopeIsTheRequestType, true);
  });

  it('the vectors cover sending, refusing, printing and handing back', () => {
    const answers = answerVectors();
    assert.ok(sent.length >= 10 && requestVectors().length - sent.length >= 3, 'requests sent and refused');
    assert.ok(answers.filter((a) => a.prints !== undefined).length >= 8, 'answers printed');
    assert.ok(answers.filter((a) => a.prints === undefined).length >= 15, 'answers handed back');
  });

  it("the plugin's encoder (cni-call.ts) writes each vector's body", () => {
    let compared = 0;
    for (const v of sent) {
      const config = v.config.toString('utf8');
      // The plugin reads its stdin as text: only a config in UTF-8 reaches its encoder unchanged.
      if (!Buffer.from(config, 'utf8').equals(v.config)) continue;
      const env = fieldsOf(v.variables) as unknown as CniEnv;
      assert.deepEqual(Buffer.from(cniRequestText(env, config)), bodyOf(v.sends as Buffer), v.name);
      compared++;
    }
    assert.ok(compared >= 10, `only ${compared} compared`);
  });

  it("the agent (forwarded-call.ts) takes each vector's body apart into its variables and its config bytes", () => {
    for (const v of sent) {
      const split = splitCniRequest(bodyOf(v.sends as Buffer));
      assert.ok(split !== undefined, v.name);
      assert.deepEqual({ ...split.fields }, fieldsOf(v.variables), v.name);
      assert.deepEqual(split.config, v.config, v.name);
    }
  });

  it('the agent takes apart no body with a field the envelope does not define', () => {
    const full = forwardedRequest({ CNI_COMMAND: 'VERSION' }, Buffer.from('{}')) as Buffer;
    assert.ok(splitCniRequest(bodyOf(full)) !== undefined);
    const body = '{"command":"VERSION","colour":"red","config":{}}';
    assert.equal(splitCniRequest(Buffer.from(body)), undefined, body);
  });

  describe("the agent's server", () => {
    let h: Harness;
    before(async () => {
      h = await harness();
    });
    after(async () => {
      await h.close();
    });

    it("accepts the envelope's fields and the config, refuses a field the definition lacks (7)", async () => {
      const request: Record<string, string | object> = { [CONFIG_FIELD]: { cniVersion: '1.1.0' } };
      for (const { field } of ENVELOPE) request[field] = field === 'command' ? 'VERSION' : '';
      const accepted = await callCni({ socket: h.socket, bodyText: JSON.stringify(request) });
      assert.deepEqual(accepted, { kind: 'result', output: versionResult() });
      const refused = await callCni({ socket: h.socket, bodyText: JSON.stringify({ ...request, colour: 'red' }) });
      assert.equal(refused.kind, 'error');
      assert.equal(refused.kind === 'error' && refused.output.code, 7);
      assert.match(refused.kind === 'error' ? refused.output.msg : '', /colour/);
    });

    it("answers a forwarder's request as the definition writes it, with the definition's head and body", async () => {
      const sends = forwardedRequest({ CNI_COMMAND: 'VERSION' }, Buffer.from('{"cniVersion":"1.1.0"}')) as Buffer;
      const raw = await new Promise<Buffer>((resolve, reject) => {
        const chunks: Buffer[] = [];
        const conn = createConnection(h.socket, () => conn.write(sends));
        conn.on('data', (c: Buffer) => chunks.push(c));
        conn.on('error', reject);
        conn.on('end', () => resolve(Buffer.concat(chunks)));
      });
      const end = raw.indexOf('\r\n\r\n');
      const [status, ...lines] = raw.subarray(0, end).toString('latin1').split('\r\n');
      assert.match(status ?? '', /^HTTP\/1\.1 200 /);
      const expected = stdoutOf('VERSION', { kind: 'result', output: versionResult() });
      for (const [name, value] of Object.entries(forwardedAnswerHeaders(expected))) {
        assert.deepEqual(
          lines.filter((l) => l.toLowerCase().startsWith(`${name}:`)),
          [`${name}: ${value}`],
          name,
        );
      }
      assert.equal(raw.subarray(end + 4).toString('utf8'), JSON.stringify(versionResult()));
    });
  });
});

/**
 * Failpoints (core/failpoints.ts): the environment's table is read as written, a bad entry is
 * refused naming it (fuzzed: any text either parses to known names or throws a WarrenError naming
 * the variable), and a failpoint armed in a child process kills it there, on its n-th hit, as
 * kill -9 would (SIGKILL, nothing after it runs).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { WarrenError } from '../../src/core/errors.ts';
import { FAILPOINTS, FAILPOINTS_ENV, parseFailpoints } from '../../src/core/failpoints.ts';

describe('failpoints', () => {
  it('reads names and the hit each fires on (1 unless @n)', () => {
    assert.deepEqual(
      [...parseFailpoints(' claim-unrecorded@3 , journal-unacknowledged ,')],
      [
        ['claim-unrecorded', 3],
        ['journal-unacknowledged', 1],
      ],
    );
    assert.equal(parseFailpoints('').size, 0);
  });

  it('refuses an unknown name or a hit that is not a whole number ≥ 1, naming it', () => {
    assert.throws(
      () => parseFailpoints('claim-unrecordd'),
      /WARREN_FAILPOINTS: no failpoint "claim-unrecordd" \(known: /,
    );
    assert.throws(() => parseFailpoints('loan-unnoted@0'), /loan-unnoted@0: the hit must be a whole number ≥ 1/);
    assert.throws(() => parseFailpoints('loan-unnoted@1.5'), /the hit must be a whole number/);
    assert.throws(() => parseFailpoints('__proto__'), /no failpoint "__proto__"/);
  });

  it('parses any text to known names or refuses it with an error naming the variable (fuzzed)', () => {
    const names = Object.keys(FAILPOINTS);
    const part = fc.oneof(fc.constantFrom(...names), fc.string({ maxLength: 12 }));
    const entry = fc
      .tuple(part, fc.option(fc.oneof(fc.nat(5).map(String), fc.string({ maxLength: 4 }))))
      .map(([name, hit]) => (hit === null ? name : `${name}@${hit}`));
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 4 }), (entries) => {
        const text = entries.join(',');
        try {
          for (const [name, hit] of parseFailpoints(text)) {
            assert.ok(names.includes(name));
            assert.ok(Number.isSafeInteger(hit) && hit >= 1);
          }
        } catch (error) {
          assert.ok(error instanceof WarrenError, String(error));
          assert.match(error.message, new RegExp(`^${FAILPOINTS_ENV}: `));
        }
      }),
    );
  });

  it('kills the process that arms it on the n-th hit, and nothing after it runs', () => {
    const script = `
      import { armFailpoints, failpoint } from './src/core/failpoints.ts';
      armFailpoints();
      for (let i = 1; i <= 5; i++) { console.log('hit ' + i); failpoint('publication-unwritten'); }
      console.log('after');
    `;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, [FAILPOINTS_ENV]: 'publication-unwritten@3' },
      encoding: 'utf8',
    });
    assert.equal(child.signal, 'SIGKILL');
    assert.equal(child.stdout, 'hit 1\nhit 2\nhit 3\n');
    assert.match(child.stderr, /failpoint publication-unwritten .*dying as kill -9 would/);
  });
});

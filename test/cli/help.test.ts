/**
 * `warren <command> --help` for every command: its usage line, what it does and its flags on
 * stdout, exit 0, whatever else is on the line (no usage error, no call to an agent: none runs
 * here). The commands that print their own help (agent, doctor, podman-events) do so too. The
 * summary `warren --help` prints comes from the same entries, so every command the dispatch
 * knows has one.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { COMMANDS, asksForHelp } from '../../src/cli/help.ts';
import { runCli } from '../../src/cli/main.ts';
import { REPO } from '../helpers/processes.ts';

async function cli(argv: readonly string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  // A socket nobody serves: a command that tried the agent instead of printing help would fail.
  const env = { WARREN_SOCKET: join(REPO, 'no-such-dir', 'warren.sock') };
  const code = await runCli(argv, { out: (t) => (out += t), err: (t) => (err += t), env });
  return { code, out, err };
}

/** The commands main.ts dispatches, read from its switch. */
const dispatched = [...readFileSync(join(REPO, 'src/cli/main.ts'), 'utf8').matchAll(/case '([a-z][a-z-]*)':/g)]
  .map((m) => m[1] ?? '')
  .filter((c) => c !== 'help');

describe('warren <command> --help', () => {
  it('has an entry for every command the dispatch knows, and none for a command it does not', () => {
    assert.deepEqual([...new Set(dispatched)].sort(), COMMANDS.map((c) => c.name).sort());
  });

  for (const { name, ownHelp } of COMMANDS) {
    it(`prints the help of ${name} and exits 0`, async () => {
      // Beside --help a command with its own help still refuses a flag it does not take (exit 2).
      const withFlag = ownHelp === true ? [] : [[name, '--pool', 'x', '--help']];
      for (const argv of [[name, '--help'], [name, '-h'], ...withFlag]) {
        const { code, out, err } = await cli(argv);
        assert.equal(code, 0, `${argv.join(' ')}: ${err}`);
        assert.equal(err, '');
        if (ownHelp === true) assert.ok(out.length > 0, `${name} prints its own help`);
        else {
          assert.match(out, new RegExp(`^usage: warren ${name}\\b`));
          assert.doesNotMatch(out, /^commands:/m, 'its own help, not the whole usage');
        }
      }
    });
  }

  it('lists the flags a command takes in its help', async () => {
    const { out } = await cli(['allocations', '--help']);
    for (const flag of ['--pool', '--pod-uid', '--cluster', '--socket', '--json']) assert.match(out, new RegExp(flag));
    const release = await cli(['release', '--help']);
    for (const flag of ['--address', '--container', '--prefix']) assert.match(release.out, new RegExp(flag));
  });

  it('treats --help after -- as an argument, not a request for help', () => {
    assert.equal(asksForHelp(['--', '--help']), false);
    assert.equal(asksForHelp(['forget', '-h']), true);
  });
});

/**
 * The CLI's one context per run (src/cli/context.ts): a command's flag first, then the environment,
 * then the agent's own default; nothing read before a command asks; and no command importing the
 * dispatch (main.ts), which made the CLI one import circle.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DEFAULT_JOURNAL_DIR } from '../../src/cni/journal-dir.ts';
import { DEFAULT_SOCKET } from '../../src/api/socket.ts';
import { DEFAULT_MIGRATION_NAMESPACE, cliContext } from '../../src/cli/context.ts';

const CLI = resolve(dirname(fileURLToPath(import.meta.url)), '../../src/cli');

/** An environment that records which variables were read. */
function recording(values: Record<string, string>): { env: NodeJS.ProcessEnv; read: string[] } {
  const read: string[] = [];
  const env = new Proxy(values, {
    get: (target, key) => {
      if (typeof key === 'string') read.push(key);
      return target[key as string];
    },
  });
  return { env, read };
}

describe('the CLI context', () => {
  it('reads nothing until a command asks (a command that needs no agent cannot fail on finding one)', () => {
    const { env, read } = recording({ WARREN_SOCKET: '/run/x.sock' });
    const context = cliContext(env);
    assert.equal(read.length, 0, `read before asked: ${read.join(', ')}`);
    assert.equal(context.socket(undefined), '/run/x.sock');
    assert.ok(read.includes('WARREN_SOCKET'));
  });

  it("takes a command's flag first, then the environment, then the agent's default", () => {
    const state = { WARREN_STATE_DIR: '/nonexistent/warren-state' };
    const root = process.getuid?.() === 0;
    const given = cliContext({
      ...state,
      WARREN_SOCKET: '/e/warren.sock',
      WARREN_JOURNAL_DIR: '/e/journal',
      WARREN_PLUGINS_DIR: '/e/plugins',
      WARREN_KUBECONFIG: '/e/kubeconfig',
      KUBECONFIG: '/k/one:/k/two',
      WARREN_NAMESPACE: 'e-ns',
    });
    assert.equal(given.socket('/f/warren.sock'), '/f/warren.sock');
    assert.equal(given.socket(undefined), '/e/warren.sock');
    assert.equal(given.journalDir('/f/journal'), '/f/journal');
    assert.equal(given.journalDir(undefined), '/e/journal');
    assert.equal(given.pluginsDir(), '/e/plugins');
    assert.equal(given.kubeconfig('/f/kubeconfig'), '/f/kubeconfig');
    assert.equal(given.kubeconfig(undefined), '/e/kubeconfig');
    assert.equal(given.migrationNamespace('f-ns'), 'f-ns');
    assert.equal(given.migrationNamespace(undefined), 'e-ns');

    const defaults = cliContext(state);
    const socket = root ? DEFAULT_SOCKET : join(state.WARREN_STATE_DIR, 'warren.sock');
    assert.equal(defaults.socket(undefined), socket);
    assert.equal(defaults.pluginsDir(), join(dirname(socket), 'plugins'));
    assert.equal(defaults.journalDir(undefined), root ? DEFAULT_JOURNAL_DIR : join(state.WARREN_STATE_DIR, 'journal'));
    assert.equal(defaults.kubeconfig(undefined), undefined);
    assert.equal(cliContext({ KUBECONFIG: '/k/one:/k/two' }).kubeconfig(undefined), '/k/one');
    assert.equal(defaults.migrationNamespace(undefined), DEFAULT_MIGRATION_NAMESPACE);
    // An empty WARREN_PLUGINS_DIR turns the registry off, as the agent reads it.
    assert.equal(cliContext({ ...state, WARREN_PLUGINS_DIR: '' }).pluginsDir(), undefined);
  });

  it('keeps every command off the dispatch: no file of src/cli imports main.ts (that closed an import circle)', () => {
    const files: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (path.endsWith('.ts')) files.push(path);
      }
    };
    walk(CLI);
    const importers = files.filter((file) =>
      [...readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(\.[^']+)'/g)].some(
        (m) => resolve(dirname(file), m[1] ?? '') === join(CLI, 'main.ts'),
      ),
    );
    assert.deepEqual(
      importers.map((f) => relative(CLI, f)),
      [],
    );
  });
});

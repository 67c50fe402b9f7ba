/**
 * docs/settings.md lists exactly the agent's settings: every flag and environment variable of
 * SETTINGS (src/agent/settings/table.ts), each once, and nothing SETTINGS does not have, so the
 * page cannot drift from what `warren agent` reads.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SETTINGS } from '../../src/agent/settings/table.ts';
import { codeSpans, docPage, sorted, tableColumn } from './doc-tables.ts';

describe('docs/settings.md', () => {
  const page = docPage('settings.md');
  const rows = Object.values(SETTINGS);

  it('lists every flag of SETTINGS, each once, and no other', () => {
    const listed = tableColumn(page, 0).flatMap(codeSpans);
    assert.deepEqual(sorted(listed), sorted(rows.map((r) => `--${r.flag}`)));
  });

  it('lists every environment variable of SETTINGS, each once, and no other', () => {
    const listed = tableColumn(page, 1).flatMap(codeSpans);
    assert.deepEqual(sorted(listed), sorted(rows.map((r) => r.env)));
  });

  it('puts a flag and its variable on one row', () => {
    for (const row of tableColumn(page, 0).map((cell, i) => [cell, tableColumn(page, 1)[i] ?? ''] as const)) {
      const flags = codeSpans(row[0]);
      const envs = codeSpans(row[1]);
      assert.deepEqual(
        envs,
        flags.map((f) => rows.find((r) => `--${r.flag}` === f)?.env),
        `${row[0]} | ${row[1]}`,
      );
    }
  });
});

/**
 * docs/metrics.md lists every metric family AgentMetrics defines (as an agent exposes them, read by
 * the Prometheus project's parser through test/helpers/agent-exposition.ts), and no family it does
 * not: a metric added to the agent fails here until it is documented.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { agentExposition } from '../helpers/agent-exposition.ts';
import { codeSpans, docPage, sorted, tableColumn } from './doc-tables.ts';

describe('docs/metrics.md', () => {
  it('lists every metric family of the agent, each once, and no other', async () => {
    const { warrenFamilies } = await agentExposition();
    const listed = tableColumn(docPage('metrics.md'), 0)
      .flatMap(codeSpans)
      .filter((name) => !name.endsWith('_*'))
      // A counter's family is named without the `_total` its samples carry.
      .map((name) => name.replace(/_total$/, ''));
    assert.deepEqual(sorted(listed), sorted(new Set(warrenFamilies)));
  });

  it("names prom-client's process metrics by their prefixes", async () => {
    const listed = tableColumn(docPage('metrics.md'), 0).flatMap(codeSpans);
    assert.ok(listed.includes('warren_process_*') && listed.includes('warren_nodejs_*'));
  });
});

/**
 * Pools on the dashboard: each range with its utilisation, and on a store shared by nodes the
 * blocks it is split into, grouped under it by the node that claimed them; then the nodes
 * themselves (alive, blocks, allocations).
 *
 * A range's figures are the agent's (`PoolReport`: a range split into blocks is reported whole,
 * its blocks summed, and block by block; a shared range also across the cluster); this section
 * only arranges them. Capacities are shown as people read them (count-text.ts: `2^64`, exact
 * whenever no `≈` is shown), and percentages computed from the decimal strings in bigint
 * (figures.ts). Each row says its pool's network_name. A block whose range is not in the report
 * still shows, under its range's key.
 */
import type { DashboardData } from '../../api/dashboard.ts';
import type { NodeReport, PoolReport } from '../../api/protocol.ts';
import { blockCidrOfKey, isBlockKey, rangePoolOfKey } from '../../ipam/blocks.ts';
import { countText } from '../../ipam/count-text.ts';
import { parsePoolKey } from '../../ipam/pool-key.ts';
import { type Html, html } from './html.ts';
import { utilisationOf } from './figures.ts';
import { badge, emptyState, firstOf, section, timeOf, utilisationBar } from './widgets.ts';

/** "2 / 254 (0.8%)", "1 / 2^64 − 1 (<0.1%)", or "2 allocated" when the capacity is unknown. */
export function utilisationText(pool: PoolReport): string {
  const u = utilisationOf(pool.allocated, pool.capacity);
  return u === undefined || pool.capacity === undefined
    ? `${pool.allocated} allocated`
    : `${pool.allocated} / ${countText(pool.capacity)} (${u.text})`;
}

/** A range shared by nodes, across the cluster: "28 / 254 on 2 nodes · 224 free · 3 lent". */
function clusterText(pool: PoolReport): Html {
  const c = pool.cluster;
  if (c === undefined) return html``;
  if (c.error !== undefined) return html`<span class="error" title="${c.error}">cluster unreadable</span>`;
  const of = pool.capacity === undefined ? '' : ` / ${countText(pool.capacity)}`;
  const parts = [`${c.allocated}${of} on ${c.nodes} ${c.nodes === 1 ? 'node' : 'nodes'}`];
  if (c.free !== undefined) parts.push(`${countText(c.free)} free`);
  if (c.lent !== undefined && c.lent > 0) parts.push(`${c.lent} lent`);
  if (c.partial === true) parts.push(`first ${c.blocks} blocks read`);
  const text = `cluster: ${parts.join(' · ')}`;
  return html`<div class="muted" data-testid="pool-cluster" data-pool="${pool.pool}">${text}</div>`;
}

/** The network_name a pool key carries; a muted dash for none. */
function networkCell(pool: string): Html {
  const name = parsePoolKey(isBlockKey(pool) ? rangePoolOfKey(pool) : pool)?.networkName ?? '';
  return html`<td data-testid="pool-network">${name === '' ? html`<span class="muted">—</span>` : name}</td>`;
}

function figureCells(pool: PoolReport): Html {
  return html`<td class="bar-cell">${utilisationBar(utilisationOf(pool.allocated, pool.capacity))}</td>
<td class="num" data-testid="pool-utilisation" data-pool="${pool.pool}">${utilisationText(pool)}${clusterText(
    pool,
  )}</td>
<td class="num" data-testid="pool-resting" data-pool="${pool.pool}">${pool.resting}</td>`;
}

function span(pool: PoolReport): Html {
  if (pool.first === undefined || pool.last === undefined) return html`<span class="muted">${pool.subnet ?? ''}</span>`;
  return html`<span class="mono">${pool.first} – ${pool.last}</span>`;
}

function rangeRow(pool: PoolReport): Html {
  const blocks =
    pool.blockPrefix === undefined
      ? html`<span class="muted">—</span>`
      : html`${pool.blocks ?? 0} claimed, /${pool.blockPrefix} each`;
  return html`<tr class="range" data-testid="pool-row" data-pool="${pool.pool}">
<th scope="row" class="mono">${pool.pool}</th>${networkCell(pool.pool)}<td>${span(pool)}</td>${figureCells(pool)}<td>${
    blocks
  }</td></tr>`;
}

function blockRow(block: PoolReport): Html {
  const cidr = blockCidrOfKey(block.pool) ?? block.subnet ?? block.pool;
  const owner = block.node === undefined ? html`<span class="muted">unclaimed</span>` : html`node <b>${block.node}</b>`;
  return html`<tr class="block" data-testid="block-row" data-pool="${block.pool}" data-node="${block.node ?? ''}">
<th scope="row" class="mono" title="${block.pool}">↳ ${cidr}</th>${networkCell(
    block.pool,
  )}<td>${owner}</td>${figureCells(block)}<td></td></tr>`;
}

/** Ranges in the report's order, each followed by its blocks (by node, then as reported). */
function poolRows(pools: readonly PoolReport[]): Html[] {
  const blocksOf = new Map<string, PoolReport[]>();
  const ranges: PoolReport[] = [];
  for (const p of pools) {
    if (!isBlockKey(p.pool)) {
      ranges.push(p);
      continue;
    }
    const range = rangePoolOfKey(p.pool);
    blocksOf.set(range, [...(blocksOf.get(range) ?? []), p]);
  }
  const byNode = (a: PoolReport, b: PoolReport) => (a.node ?? '\uffff').localeCompare(b.node ?? '\uffff');
  const rows: Html[] = [];
  for (const range of ranges) {
    rows.push(rangeRow(range));
    rows.push(...(blocksOf.get(range.pool) ?? []).sort(byNode).map(blockRow));
    blocksOf.delete(range.pool);
  }
  // Blocks of a range the report has no row for: a heading of their own, so none is hidden.
  for (const [range, blocks] of blocksOf) {
    rows.push(
      html`<tr class="range orphan"><th scope="row" class="mono">${
        range
      }</th><td colspan="6" class="muted">range not described in the store</td></tr>`,
    );
    rows.push(...blocks.sort(byNode).map(blockRow));
  }
  return rows;
}

export function poolsSection(data: DashboardData): Html {
  if (data.pools.length === 0)
    return section(
      'Pools',
      'pools',
      emptyState('No pool yet: a range appears here with its first allocation.', 'pools-empty'),
    );
  const table = html`<table class="grid pools">
<thead><tr><th>Range / block</th><th>Network name</th><th>Addresses</th><th>Utilisation</th>
<th class="num">Allocated / capacity</th>
<th class="num">Resting</th><th>Blocks</th></tr></thead>
<tbody>${poolRows(data.pools)}</tbody></table>`;
  return section(
    'Pools',
    'pools',
    table,
    html`${data.status.allocations} allocations · resting addresses wait out their cooldown before reuse`,
  );
}

function nodeRow(node: NodeReport, now: string): Html {
  const blocks = node.blocks.map((key) => ({ key, cidr: blockCidrOfKey(key) ?? key }));
  return html`<tr data-testid="node-row" data-node="${node.node}" data-alive="${String(node.alive)}">
<th scope="row">${node.node}</th><td>${node.alive ? badge('good', 'alive') : badge('warn', 'gone')}</td>
<td>${node.since === undefined ? html`<span class="muted">—</span>` : timeOf(node.since, now, { relative: true })}</td>
<td>${node.version ?? ''}</td>
<td class="num" data-testid="node-blocks">${
    node.blocks.length
  }</td><td class="num" data-testid="node-allocations">${node.allocations}${
    node.lent === undefined ? '' : html` <span class="muted" data-testid="node-lent">+${node.lent} lent</span>`
  }</td>
<td><ul class="inline mono">${firstOf(blocks, 8, (b) => html`<li title="${b.key}">${b.cidr}</li>`)}</ul></td></tr>`;
}

/** Only on a store shared by nodes (`data.nodes` present). */
export function nodesSection(data: DashboardData): Html {
  if (data.nodes === undefined) return html``;
  if (data.nodes.length === 0)
    return section('Nodes', 'nodes', emptyState('No node has announced itself yet.', 'nodes-empty'));
  const table = html`<table class="grid">
<thead><tr><th>Node</th><th>State</th><th>Since</th><th>Version</th><th class="num">Blocks</th>
<th class="num">Allocations</th><th>Its blocks</th></tr></thead>
<tbody>${data.nodes.map((n) => nodeRow(n, data.generatedAt))}</tbody></table>`;
  return section('Nodes', 'nodes', table, 'sharing the store');
}

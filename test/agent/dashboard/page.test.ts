/**
 * The dashboard rendered from fixture data, without a browser: untrusted values render inert,
 * utilisation figures are exact (bigint, IPv6 capacities whole), empty states say so, a source's
 * card shows only when the source is on, and the page asks for nothing outside the agent.
 * (test/e2e/dashboard-browser.test.ts runs the real page in Chromium against a real agent.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AgentStatus, PluginsStatus } from '../../../src/api/status.ts';
import type { CniFailure } from '../../../src/api/dashboard.ts';
import { clockTime, formatDuration, utilisationOf } from '../../../src/agent/dashboard/figures.ts';
import { Html, escapeHtml, html } from '../../../src/agent/dashboard/html.ts';
import { DASHBOARD_ASSETS, renderDashboardBody, renderDashboardPage } from '../../../src/agent/dashboard/page.ts';
import { NOW, busyDashboard, bySource, dashboardData, range, release } from './fixtures.ts';

/** The text of the element carrying `data-testid` (and `attr="value"` when given), tags stripped; undefined when absent. */
function textOf(page: string, testid: string, attr?: readonly [string, string]): string | undefined {
  const filter = attr === undefined ? '' : `[^>]*\\b${attr[0]}="${escapeRegExp(escapeHtml(attr[1]))}"`;
  const match = new RegExp(`<(\\w+)[^>]*\\bdata-testid="${testid}"${filter}[^>]*>([\\s\\S]*?)</\\1>`).exec(page);
  return match === null ? undefined : decode((match[2] as string).replace(/<[^>]+>/g, ''));
}

function all(page: string, testid: string): string[] {
  return [...page.matchAll(new RegExp(`<[^>]*\\bdata-testid="${testid}"[^>]*>`, 'g'))].map((m) => m[0]);
}

function attrOf(tag: string, name: string): string | undefined {
  const match = new RegExp(`\\b${name}="([^"]*)"`).exec(tag);
  return match === null ? undefined : decode(match[1] as string);
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const decode = (s: string) =>
  s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&');

describe('dashboard page', () => {
  describe('escaping', () => {
    const hostile = '<script>alert(1)</script>';
    const breakout = '"><img src=x onerror=alert(2)>';
    const data = dashboardData(
      {
        pools: [range(`10.9.0.0/24@${hostile}`, 1, '254')],
        releases: [
          release(1, {
            reason: hostile,
            containerID: breakout,
            network: `it's ${hostile}`,
            adapter: breakout,
            source: 'plugin',
          }),
        ],
        nodes: [{ node: breakout, alive: true, blocks: [`10.9.0.0/24@x#${hostile}`], allocations: 1 }],
      },
      { node: hostile, notReady: breakout, ready: false },
    );

    it('renders a pool name, a reason, a container ID and a node name holding markup as inert text', () => {
      const page = renderDashboardPage(data);
      assert.equal(page.match(/<script/g)?.length, 1, 'only the page’s own script');
      assert.doesNotMatch(page, /<img/);
      assert.doesNotMatch(page, /onerror=alert\(2\)>/);
      assert.match(page, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
      assert.equal(textOf(page, 'pool-utilisation', ['data-pool', `10.9.0.0/24@${hostile}`]), '1 / 254 (0.4%)');
      assert.ok(page.includes(`title="${escapeHtml(breakout)}"`), 'an attribute holds the value, quotes and all');
    });

    it('puts no script at all in the fragment the refresh swaps in', () => {
      assert.doesNotMatch(renderDashboardBody(data), /<script/i);
    });

    it('escapes the five characters that matter in text and in quoted attributes', () => {
      assert.equal(
        escapeHtml(`<a href="x" title='y'>&</a>`),
        '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;',
      );
    });

    it('escapes interpolated values once, and never markup made by the template itself', () => {
      const inner = html`<b>${'<i>'}</b>`;
      assert.equal(
        html`<p>${inner}${['<', inner]}${undefined}${null}${false}${0}</p>`.toString(),
        '<p><b>&lt;i&gt;</b>&lt;<b>&lt;i&gt;</b>0</p>',
      );
    });

    it('makes markup only through the template: a string cannot be passed off as markup', () => {
      assert.throws(() => new Html(Symbol('Html') as never, '<script>'), TypeError);
    });
  });

  describe('utilisation', () => {
    it('shows 3 of 254 as "3 / 254 (1.2%)" with a bar 1.18% wide', () => {
      const page = renderDashboardBody(
        dashboardData({ pools: [range('10.0.0.0/24', 3, '254', { first: '10.0.0.1', last: '10.0.0.254' })] }),
      );
      assert.equal(textOf(page, 'pool-utilisation', ['data-pool', '10.0.0.0/24']), '3 / 254 (1.2%)');
      assert.match(page, /<rect class="fill low" width="1\.18%" height="100%"\/>/);
    });

    it('shows an IPv6 /64 capacity as 2^64 (not a 20-digit number), and 2 addresses of it as "<0.1%", not 0%', () => {
      const page = renderDashboardBody(dashboardData({ pools: [range('fd00:1::/64', 2, '18446744073709551616')] }));
      assert.equal(textOf(page, 'pool-utilisation', ['data-pool', 'fd00:1::/64']), '2 / 2^64 (<0.1%)');
    });

    it('rounds half up, and never says 100% while an address is free nor 0% while one is used', () => {
      const cases: Array<[number, string, string]> = [
        [0, '254', '0.0%'],
        [1, '2000', '0.1%'],
        [1, '2001', '<0.1%'],
        [253, '254', '99.6%'],
        [9_999, '10000', '>99.9%'],
        [254, '254', '100.0%'],
        [1, '18446744073709551616', '<0.1%'],
        [9_007_199_254_740_991, '18446744073709551616', '<0.1%'],
      ];
      for (const [allocated, capacity, text] of cases)
        assert.equal(utilisationOf(allocated, capacity)?.text, text, `${allocated} of ${capacity}`);
    });

    it('colours the bar by level and draws no fill for an empty pool', () => {
      assert.equal(utilisationOf(204, '254')?.level, 'high');
      assert.equal(utilisationOf(242, '254')?.level, 'full');
      assert.equal(
        utilisationOf(300, '254')?.width,
        '100.00',
        'more allocated than capacity (a shrunk range) stays within the bar',
      );
      assert.doesNotMatch(
        renderDashboardBody(dashboardData({ pools: [range('10.0.0.0/24', 0, '254')] })),
        /class="fill/,
      );
    });

    it('says only how many are allocated when the capacity is unknown, zero or not a number', () => {
      for (const capacity of [undefined, '0', '1e3', '-5', '']) {
        const page = renderDashboardBody(dashboardData({ pools: [range('10.0.0.0/24', 2, capacity)] }));
        assert.equal(textOf(page, 'pool-utilisation', ['data-pool', '10.0.0.0/24']), '2 allocated', String(capacity));
        assert.match(page, /class="bar unknown"/);
      }
    });

    it('lists each range with its resting count, then its blocks grouped by node under it', () => {
      const data = dashboardData({
        pools: [
          range('10.5.0.0/16', 70, '65534', { blockPrefix: 26, blocks: 3, resting: 4 }),
          range('10.5.0.64/26', 0, '62', { pool: '10.5.0.0/16#10.5.0.64/26', node: 'node-b' }),
          range('10.6.0.0/24', 1, '254'),
          range('10.5.0.0/26', 60, '62', { pool: '10.5.0.0/16#10.5.0.0/26', node: 'node-a' }),
          range('10.5.0.128/26', 10, '62', { pool: '10.5.0.0/16#10.5.0.128/26', node: 'node-a' }),
          range('10.7.0.0/26', 5, '62', { pool: '10.7.0.0/16#10.7.0.0/26', node: 'node-c' }),
        ],
      });
      const page = renderDashboardBody(data);
      const rows = [
        ...page.matchAll(/data-testid="(pool-row|block-row)" data-pool="([^"]*)"(?: data-node="([^"]*)")?/g),
      ].map((m) => `${m[1]} ${m[2]}${m[3] === undefined ? '' : ` ${m[3]}`}`);
      assert.deepEqual(rows, [
        'pool-row 10.5.0.0/16',
        'block-row 10.5.0.0/16#10.5.0.0/26 node-a',
        'block-row 10.5.0.0/16#10.5.0.128/26 node-a',
        'block-row 10.5.0.0/16#10.5.0.64/26 node-b',
        'pool-row 10.6.0.0/24',
        'block-row 10.7.0.0/16#10.7.0.0/26 node-c',
      ]);
      assert.equal(textOf(page, 'pool-utilisation', ['data-pool', '10.5.0.0/16']), '70 / 65,534 (0.1%)');
      assert.equal(textOf(page, 'pool-resting', ['data-pool', '10.5.0.0/16']), '4');
      assert.equal(textOf(page, 'pool-utilisation', ['data-pool', '10.5.0.0/16#10.5.0.0/26']), '60 / 62 (96.8%)');
      assert.match(page, /3 claimed, \/26 each/);
      assert.match(page, /range not described in the store/, 'the block of a range without a row still shows');
    });
  });

  describe('sections', () => {
    it('says there is no pool yet and no release yet on a fresh agent', () => {
      const page = renderDashboardBody(dashboardData());
      assert.match(textOf(page, 'pools-empty') ?? '', /No pool yet/);
      assert.match(textOf(page, 'releases-empty') ?? '', /No address released/);
      assert.doesNotMatch(page, /data-testid="release-row"/);
      assert.equal(textOf(page, 'releases-total'), '0');
    });

    it('shows the agent ready with its store healthy, or why not', () => {
      const well = renderDashboardBody(dashboardData());
      assert.match(all(well, 'ready')[0] ?? '', /data-ready="true"/);
      assert.match(well, /<span class="badge good">ready<\/span>/);
      assert.match(textOf(well, 'uptime') ?? '', /^Up2h 20m/);
      const ill = renderDashboardBody(
        dashboardData(
          {},
          {
            ready: false,
            notReady: 'the readiness indicator /run/flannel/subnet.env is missing',
            store: { description: 'etcd https://etcd:2379', healthy: false, error: 'deadline exceeded' },
          },
        ),
      );
      assert.match(textOf(ill, 'ready') ?? '', /not ready.*readiness indicator \/run\/flannel\/subnet\.env is missing/);
      assert.match(textOf(ill, 'store-health') ?? '', /unhealthy.*deadline exceeded/);
    });

    it('lists the releases newest first with source, reason and the container ID cut to 12 characters', () => {
      const data = dashboardData({
        releases: [
          release(1, { source: 'operator', reason: 'warren release' }),
          release(2, { source: 'plugin', adapter: 'podman', reason: 'container removed' }),
          release(3),
        ],
        releasesBySource: bySource({ 'cni-del': 5, operator: 1, plugin: 2 }),
      });
      const page = renderDashboardBody(data);
      const rows = all(page, 'release-row');
      assert.deepEqual(
        rows.map((r) => attrOf(r, 'data-source')),
        ['operator', 'plugin', 'cni-del'],
      );
      const first = data.releases[0]?.containerID as string;
      assert.match(page, new RegExp(`title="${first}">${first.slice(0, 12)}</td>`));
      assert.match(page, /plugin · podman/);
      assert.equal(textOf(page, 'release-count', ['data-source', 'cni-del']), 'cni-del5');
      assert.equal(
        textOf(page, 'release-count', ['data-source', 'gc']),
        'gc0',
        'a source that released nothing shows its zero',
      );
      assert.equal(textOf(page, 'releases-total'), '8');
    });

    it('shows only the journal when no other source is on', () => {
      const page = renderDashboardBody(dashboardData());
      assert.deepEqual(
        all(page, 'source-[a-z-]+').map((t) => attrOf(t, 'data-testid')),
        ['source-journal'],
      );
      assert.doesNotMatch(page, /data-testid="nodes"/, 'no nodes section off etcd');
    });

    it('shows each source that is on, its state coloured by what it means', () => {
      const status: Partial<AgentStatus> = {
        containerd: {
          socket: '/run/containerd/containerd.sock',
          namespaces: ['k8s.io'],
          state: 'reconnecting',
          since: NOW,
          subscriptions: 2,
          events: 10,
          skipped: 1,
          malformed: 0,
          lastError: 'connection refused',
          releases: { released: 3, exited: [], queue: [] },
        },
        kubernetes: {
          pods: { state: 'backing-off', since: NOW, relists: 1, reconnects: 2, forbidden: 'list pods' },
          releases: {
            tracked: 1,
            waiting: [],
            released: 4,
            gaveUp: 0,
            resyncs: 1,
            queue: { depth: 0, processing: 0, delayed: 0, retries: 0 },
          },
          events: { sent: 1, aggregated: 0, dropped: 0, refused: 0 },
          forbidden: ['list pods'],
        },
        cniConfig: {
          state: 'current',
          confDir: '/etc/cni/net.d',
          output: '/etc/cni/net.d/05-warren.conflist',
          cniVersionMax: '1.1.0',
          primary: '/etc/cni/net.d/10-flannel.conflist',
          writes: 1,
        },
        plugins: { registered: 1, refused: 1, retrying: 0 },
        reconciler: {
          journalDir: '/j',
          listed: true,
          pending: [
            {
              name: 'a.release',
              network: 'n',
              containerID: 'abc',
              ifname: 'eth0',
              failures: 2,
              lastError: 'store down',
            },
          ],
          rejected: [],
          unread: [],
          releasedFromJournal: 0,
          recentErrors: [],
        },
      };
      const plugins: PluginsStatus = {
        dir: '/run/warren/plugins',
        watcher: 'watching',
        registered: 1,
        refused: 1,
        retrying: 0,
        plugins: [
          {
            socket: '/run/warren/plugins/podman.sock',
            state: 'registered',
            type: 'runtime-adapter',
            name: 'podman',
            since: NOW,
            failures: 0,
          },
          {
            socket: '/run/warren/plugins/bad.sock',
            state: 'refused',
            since: NOW,
            failures: 1,
            error: 'unknown type "x"',
          },
        ],
      };
      const page = renderDashboardBody(dashboardData({ plugins }, status));
      const cards = Object.fromEntries(
        all(page, 'source-[a-z-]+').map((t) => [
          attrOf(t, 'data-testid'),
          `${attrOf(t, 'class')} ${attrOf(t, 'data-state')}`,
        ]),
      );
      assert.deepEqual(cards, {
        'source-journal': 'card warn pending',
        'source-containerd': 'card warn reconnecting',
        'source-kubernetes': 'card bad pods backing-off',
        'source-plugins': 'card bad 1 refused',
        'source-cni-config': 'card good current',
      });
      assert.match(page, /connection refused/);
      assert.match(page, /list pods/);
      assert.deepEqual(
        all(page, 'plugin-row').map((t) => attrOf(t, 'data-state')),
        ['registered', 'refused'],
      );
      assert.match(page, /unknown type &quot;x&quot;/);
      assert.equal(textOf(page, 'journal-pending-count'), '1');
    });

    it('shows the nodes sharing the store, alive or gone, with their blocks and allocations', () => {
      const page = renderDashboardBody(
        dashboardData({
          nodes: [
            {
              node: 'node-a',
              alive: true,
              since: NOW,
              version: '0.1.0',
              blocks: ['10.5.0.0/16#10.5.0.0/26', '10.5.0.0/16#10.5.0.128/26'],
              allocations: 70,
            },
            { node: 'node-z', alive: false, blocks: [], allocations: 0 },
          ],
        }),
      );
      assert.deepEqual(
        all(page, 'node-row').map((t) => `${attrOf(t, 'data-node')} ${attrOf(t, 'data-alive')}`),
        ['node-a true', 'node-z false'],
      );
      assert.equal(textOf(page, 'node-blocks'), '2');
      assert.equal(textOf(page, 'node-allocations'), '70');
      assert.match(page, /title="10\.5\.0\.0\/16#10\.5\.0\.128\/26">10\.5\.0\.128\/26</);
    });
  });

  describe('failed calls and networks', () => {
    const failure = (over: Partial<CniFailure> = {}): CniFailure => ({
      at: '2025-03-04T10:19:00.000Z',
      command: 'ADD',
      code: 11,
      network: 'macvlan-conf',
      message: 'pool 10.9.0.0/29@tenant has no free address on node node-a (6 allocated here, 0 resting after release)',
      containerID: 'c'.repeat(64),
      ...over,
    });

    it('counts failed calls by network, command and code, and lists the latest with their messages, escaped', () => {
      const page = renderDashboardBody(
        dashboardData({
          failuresByCode: [
            { network: 'macvlan-conf', command: 'ADD', code: 11, count: 3 },
            { network: '', command: 'DEL', code: 7, count: 1 },
          ],
          failures: [failure({ message: '<img src=x onerror=alert(1)> is not a range' }), failure()],
        }),
      );
      assert.equal(textOf(page, 'failures-total'), '4');
      const counts = all(page, 'failure-count').map((t) => [attrOf(t, 'data-network'), attrOf(t, 'data-code')]);
      assert.deepEqual(counts, [
        ['macvlan-conf', '11'],
        ['', '7'],
      ]);
      assert.match(textOf(page, 'failure-count', ['data-network', '']) ?? '', /^\(none\)DEL\s*71$/);
      assert.equal(all(page, 'failure-row').length, 2);
      assert.doesNotMatch(page, /<img/, 'a message is text, never markup');
      assert.match(page, /&lt;img src=x onerror=alert\(1\)&gt; is not a range/);
      assert.match(page, /has no free address on node node-a/);
    });

    it('says no call failed on a fresh agent, and shows no section for an older agent that reports none', () => {
      const fresh = renderDashboardBody(dashboardData({ failuresByCode: [], failures: [] }));
      assert.match(textOf(fresh, 'failures-empty') ?? '', /No CNI call failed/);
      assert.doesNotMatch(renderDashboardBody(dashboardData()), /data-testid="failures"/);
    });

    it("names each pool's network_name, and a shared range's figures across the cluster", () => {
      const page = renderDashboardBody(
        dashboardData({
          pools: [
            range('10.9.0.0/24@tenant', 3, '254', {
              blockPrefix: 29,
              blocks: 1,
              cluster: { allocated: 28, resting: 2, lent: 3, free: '224', nodes: 2, blocks: 4 },
            }),
            range('10.8.0.0/24', 1, '254'),
          ],
        }),
      );
      const networks = all(page, 'pool-network').length;
      assert.equal(networks, 2);
      assert.match(page, /<td data-testid="pool-network">tenant<\/td>/);
      assert.equal(
        textOf(page, 'pool-cluster', ['data-pool', '10.9.0.0/24@tenant']),
        'cluster: 28 / 254 on 2 nodes · 224 free · 3 lent',
      );
    });
  });

  describe('the document', () => {
    it('asks for nothing outside the agent: no absolute URL, no external resource, an empty icon', () => {
      const page = renderDashboardPage(busyDashboard(10, 100));
      assert.doesNotMatch(page, /https?:\/\//i);
      const loaded = [...page.matchAll(/(?:src|href|action|srcset)\s*=\s*"([^"]*)"/gi)].map((m) => m[1]);
      assert.deepEqual(
        loaded,
        ['data:,', 'dashboard.css', 'dashboard.js'],
        "nothing is loaded but the agent's own style sheet and script, relatively, and a data URL",
      );
      for (const [path, asset] of DASHBOARD_ASSETS)
        assert.doesNotMatch(asset.body, /@import|url\(|https?:\/\//i, `${path} loads nothing`);
      assert.match(page, /<link rel="icon" href="data:,">/);
      assert.match(page, /^<!doctype html>\n<html lang="en">/);
    });

    it("holds nothing inline that a Content-Security-Policy without 'unsafe-inline' would refuse: no <style>, no style attribute, no inline script or handler", () => {
      const page = renderDashboardPage(busyDashboard(10, 100));
      assert.doesNotMatch(page, /<style/i);
      assert.doesNotMatch(page, /\sstyle\s*=/i);
      assert.doesNotMatch(page, /\son[a-z]+\s*=/i);
      for (const script of page.match(/<script[^>]*>[\s\S]*?<\/script>/g) ?? [])
        assert.match(script, /^<script src="[^"]+"[^>]*><\/script>$/, 'a script loads its text; none is inline');
    });

    it('refreshes every 5 seconds by default from the fragment, at the interval given, or not at all', () => {
      const data = dashboardData();
      assert.match(renderDashboardPage(data), /<script src="dashboard\.js" data-every="5000"><\/script>/);
      assert.match(renderDashboardPage(data, { refreshSeconds: 2 }), /data-every="2000"/);
      assert.doesNotMatch(renderDashboardPage(data, { refreshSeconds: 0 }), /<script/);
      const script = DASHBOARD_ASSETS.get('/dashboard.js')?.body ?? '';
      assert.match(script, /dataset\.every[\s\S]*fetch\('fragment'/);
      assert.match(script, /agent not answering since /);
    });

    it('holds the fragment as its main element’s content, so the refresh swaps like for like', () => {
      const data = busyDashboard(3, 5);
      assert.ok(renderDashboardPage(data).includes(`<main id="dashboard">${renderDashboardBody(data)}</main>`));
    });

    it('renders the same page from the same data', () => {
      assert.equal(renderDashboardPage(busyDashboard(10, 100)), renderDashboardPage(busyDashboard(10, 100)));
    });

    it('stays small: 10 pools and 100 releases under 80 KiB', () => {
      const bytes = Buffer.byteLength(renderDashboardPage(busyDashboard(10, 100)));
      assert.ok(bytes < 80 * 1024, `${bytes} bytes`);
    });
  });

  describe('figures', () => {
    it('writes durations as their two largest units', () => {
      assert.deepEqual([0, 45, 725, 3_600, 11_040, 183_600].map(formatDuration), [
        '0s',
        '45s',
        '12m 5s',
        '1h 0m',
        '3h 4m',
        '2d 3h',
      ]);
    });

    it('writes a time on the day of the page as a clock time, another day with its date', () => {
      assert.equal(clockTime('2025-03-04T01:02:03.000Z', NOW), '01:02:03');
      assert.equal(clockTime('2025-03-03T23:59:59.000Z', NOW), '2025-03-03 23:59:59');
      assert.equal(clockTime('not a time', NOW), 'not a time');
    });
  });
});

/**
 * The dashboard in a real browser: Debian's Chromium, headless, driven by playwright-core, against
 * a real agent (bin/warren) after a scripted run of CNI calls over its socket. Shown: the page
 * shows the pool's utilisation as the calls left it and each release with its source (a CNI DEL as
 * `cni-del`, `warren release` as `operator`); it refreshes itself in place (no navigation) and
 * shows the next ADD; when the agent stops it says since when and keeps what it showed; its style
 * sheet and script work under a policy that allows nothing inline; and neither the page nor anything it loads asks for a URL outside the agent's
 * metrics address. A screenshot is saved to test-artifacts/dashboard.png; the load time and size
 * are reported as diagnostics.
 *
 * The browser runs on a private profile and home under a temp dir, with background networking,
 * component updates, sync and extensions off, so the only requests it makes are the page's.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type BrowserContext, type Page, chromium } from 'playwright-core';
import { ApiClient } from '../../src/api/client.ts';
import type { CniOutcome, CniRequest } from '../../src/api/protocol.ts';
import type { DashboardData } from '../../src/api/dashboard.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { HANG_BOUND_MS, REPO, tempDir, waitFor } from '../helpers/processes.ts';

const CHROMIUM = '/usr/bin/chromium';
const skip = existsSync(CHROMIUM)
  ? false
  : `${CHROMIUM} is not installed (apt-get install chromium): the dashboard cannot be shown in a browser`;
const SCREENSHOT = join(REPO, 'test-artifacts', 'dashboard.png');
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const RANGE = '10.77.0.0/24';

function cni(command: 'ADD' | 'DEL', containerID: string): CniRequest {
  return {
    command,
    containerID,
    netns: `/var/run/netns/${containerID}`,
    ifname: 'eth0',
    config: { cniVersion: '1.0.0', name: 'dash-net', type: 'warren', ipam: { type: 'warren', range: RANGE } },
  };
}

function assertServed(outcome: CniOutcome, what: string): void {
  assert.notEqual(outcome.kind, 'error', `${what}: ${JSON.stringify(outcome)}`);
}

/** What the page shows in an element, by test id and one attribute. */
async function shown(page: Page, testid: string, attr: string, value: string): Promise<string | null> {
  return page.locator(`[data-testid="${testid}"][${attr}="${value}"]`).first().textContent();
}

describe('the dashboard in Chromium', { skip }, () => {
  let agent: AgentHandle | undefined;
  let context: BrowserContext | undefined;
  let client: ApiClient;
  let origin: string;
  let poolKey: string;
  const requested: string[] = [];

  before(async () => {
    agent = await startAgent({ args: ['--metrics-address', '127.0.0.1:0'] });
    client = new ApiClient({ socket: agent.socket, timeoutMs: 10_000 });
    const address = await waitFor(
      'the agent to report its metrics address',
      async () => (await client.status()).metrics?.address,
    );
    origin = `http://${address}`;

    // The scripted run: four ADDs, one DEL (cni-del), one `warren release` (operator): 2 left.
    for (const id of ['dash-1', 'dash-2', 'dash-3', 'dash-4'])
      assertServed(await client.cni(cni('ADD', id)), `ADD ${id}`);
    assertServed(await client.cni(cni('DEL', 'dash-1')), 'DEL dash-1');
    // One refused ADD: a range that is no subnet, on a network of its own.
    const bad = cni('ADD', 'dash-bad');
    const badConfig = {
      cniVersion: '1.0.0',
      name: 'dash-bad-net',
      type: 'warren',
      ipam: { type: 'warren', range: '10.77.0.0/33' },
    };
    assert.equal((await client.cni({ ...bad, config: badConfig })).kind, 'error');
    assert.equal((await client.release({ containerID: 'dash-2' })).released.length, 1);

    const data = (await (await fetch(`${origin}/dashboard.json`)).json()) as DashboardData;
    const pool = data.pools.find((p) => p.subnet === RANGE);
    assert.ok(pool !== undefined, `a pool for ${RANGE} in ${JSON.stringify(data.pools)}`);
    assert.equal(pool.capacity, '254', 'a /24 hands out .1 to .254');
    poolKey = pool.pool;

    const home = tempDir('warren-chromium-');
    context = await chromium.launchPersistentContext(join(home, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-default-apps',
        '--disable-extensions',
      ],
      // Chromium's own files (config, cache, crash reports) stay under the temp dir too.
      env: { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, 'config'), XDG_CACHE_HOME: join(home, 'cache') },
      viewport: { width: 1280, height: 900 },
    });
    context.on('request', (request) => requested.push(request.url()));
  });

  after(async () => {
    await context?.close().catch(() => undefined);
    await agent?.stop();
  });

  it('shows the pool and the releases as the scripted run left them, refreshes itself, keeps its content when the agent stops, and asks nothing of anyone else', async (t) => {
    const page = context?.pages()[0] ?? (await (context as BrowserContext).newPage());
    const refused: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) refused.push(message.text());
    });
    const response = await page.goto(`${origin}/`, { waitUntil: 'load' });
    assert.equal(response?.status(), 200);
    // No inline script or style is allowed, so injected markup cannot run: the page's own style
    // sheet and script come from the agent and work under that policy.
    const csp = (await response?.allHeaders())?.['content-security-policy'] ?? '';
    assert.match(csp, /script-src 'self'/);
    assert.doesNotMatch(csp, /unsafe-inline/);
    assert.equal(
      await page.evaluate(() => getComputedStyle(document.querySelector('.panel') as Element).borderTopStyle),
      'solid',
      'the style sheet applies',
    );
    const fill = await page
      .locator(`[data-testid="pool-utilisation"][data-pool="${poolKey}"]`)
      .first()
      .evaluate((el) =>
        Math.max(
          -1,
          ...[...(el.closest('tr')?.querySelectorAll('.bar rect') ?? [])].map((r) => r.getBoundingClientRect().width),
        ),
      );
    assert.ok(fill >= 3, `the utilisation bar is drawn (${fill} px)`);

    const timing = await page.evaluate(() => {
      const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming;
      return {
        response: nav.responseEnd - nav.requestStart,
        domContentLoaded: nav.domContentLoadedEventEnd,
        load: nav.loadEventEnd,
        bytes: nav.decodedBodySize,
      };
    });
    t.diagnostic(
      `page ${timing.bytes} bytes; response ${timing.response.toFixed(1)} ms, DOMContentLoaded ${timing.domContentLoaded.toFixed(1)} ms, load ${timing.load.toFixed(1)} ms after navigation start`,
    );

    assert.equal(await shown(page, 'pool-utilisation', 'data-pool', poolKey), '2 / 254 (0.8%)');
    const rows = await page.locator('[data-testid="release-row"]').evaluateAll((trs) =>
      trs.map((tr) => ({
        source: tr.getAttribute('data-source'),
        container: tr.querySelector('td[title]:not([title^="pool "])')?.getAttribute('title'),
      })),
    );
    assert.deepEqual(rows, [
      { source: 'operator', container: 'dash-2' },
      { source: 'cni-del', container: 'dash-1' },
    ]);
    assert.equal(await shown(page, 'release-count', 'data-source', 'cni-del'), 'cni-del1');
    assert.equal(await shown(page, 'release-count', 'data-source', 'operator'), 'operator1');
    assert.equal(await page.getAttribute('[data-testid="ready"]', 'data-ready'), 'true');
    assert.match((await shown(page, 'failure-count', 'data-network', 'dash-bad-net')) ?? '', /^dash-bad-netADD\s*71$/);
    assert.match(
      (await page.locator('[data-testid="failure-row"]').first().textContent()) ?? '',
      /dash-bad-netADD7\s*ipam\.range: "10\.77\.0\.0\/33" is not a CIDR/,
      'the latest failed call, with the message the runtime was given',
    );

    // One more ADD: the page shows it by itself, in place (the marker survives: no reload).
    await page.evaluate(() => {
      (window as unknown as { warrenMarker: number }).warrenMarker = 1;
    });
    assertServed(await client.cni(cni('ADD', 'dash-5')), 'ADD dash-5');
    await page.waitForFunction(
      (key) =>
        document.querySelector(`[data-testid="pool-utilisation"][data-pool="${key}"]`)?.textContent ===
        '3 / 254 (1.2%)',
      poolKey,
      { timeout: HANG_BOUND_MS, polling: 100 },
    );
    assert.equal(
      await page.evaluate(() => (window as unknown as { warrenMarker?: number }).warrenMarker),
      1,
      'the page refreshed in place, not by navigating',
    );
    assert.match((await page.textContent('[data-testid="refresh-state"]')) ?? '', /refreshes every 5s/);

    mkdirSync(join(REPO, 'test-artifacts'), { recursive: true });
    rmSync(SCREENSHOT, { force: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    assert.deepEqual(readFileSync(SCREENSHOT).subarray(0, 8), PNG_SIGNATURE);

    // The agent stops: the page says so, and keeps what it last showed.
    assert.equal(await agent?.stop(), 0);
    await page.waitForFunction(
      () =>
        /^agent not answering since \d\d:\d\d:\d\d UTC$/.test(
          document.querySelector('[data-testid="refresh-state"]')?.textContent ?? '',
        ),
      null,
      { timeout: HANG_BOUND_MS, polling: 100 },
    );
    assert.equal(await shown(page, 'pool-utilisation', 'data-pool', poolKey), '3 / 254 (1.2%)');

    assert.ok(
      requested.some((url) => url === `${origin}/fragment`),
      `the refresh fetched /fragment: ${requested.join(', ')}`,
    );
    for (const url of requested) assert.equal(new URL(url).origin, origin, `a request outside the agent: ${url}`);
    assert.deepEqual(refused, [], 'the browser refused nothing of the page under its policy');
  });
});

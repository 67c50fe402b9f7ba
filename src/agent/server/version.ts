/**
 * Warren's version: package.json's, read once when this module loads, so the agent's status, its
 * node announcement and `warren version` say what the package says and nothing else does.
 * The agent and the CLI run from the sources (src/agent/server/) or from the CLI bundle (dist/cli/),
 * at different depths below package.json, so it is looked for upwards: the nearest package.json
 * named warren. The plugin bundle does not load this file: it prints only CNI spec versions
 * (VERSION), never Warren's.
 */
import { existsSync, readFileSync } from 'node:fs';

function packageVersion(): string {
  for (let up = '../'; up.length <= '../'.length * 4; up += '../') {
    const url = new URL(`${up}package.json`, import.meta.url);
    if (!existsSync(url)) continue;
    const json = JSON.parse(readFileSync(url, 'utf8')) as { name?: unknown; version?: unknown };
    if (json.name !== 'warren') continue;
    if (typeof json.version !== 'string' || json.version === '') throw new Error(`${url.pathname} names no version`);
    return json.version;
  }
  throw new Error(`no package.json named warren above ${new URL('.', import.meta.url).pathname}`);
}

export const WARREN_VERSION: string = packageVersion();

/**
 * Warren's version: package.json's, read once when this module loads, so the agent's status, its
 * node announcement and `warren version` say what the package says and nothing else does.
 * The agent and the CLI run from the sources, beside package.json. The plugin bundle does not load
 * this file: it prints only CNI spec versions (VERSION), never Warren's.
 */
import { readFileSync } from 'node:fs';

function packageVersion(): string {
  const url = new URL('../../package.json', import.meta.url);
  const version: unknown = (JSON.parse(readFileSync(url, 'utf8')) as { version?: unknown }).version;
  if (typeof version !== 'string' || version === '') throw new Error(`${url.pathname} names no version`);
  return version;
}

export const WARREN_VERSION: string = packageVersion();

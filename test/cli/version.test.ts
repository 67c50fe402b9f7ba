/**
 * One version: what package.json says is what `warren version` prints and what a running agent
 * answers in its status.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ApiClient } from '../../src/api/client.ts';
import { type AgentHandle, startAgent } from '../helpers/agent.ts';
import { REPO, WARREN_BIN, run } from '../helpers/processes.ts';

const PACKAGE_VERSION = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;

describe("Warren's version", () => {
  let agent: AgentHandle;
  before(async () => {
    agent = await startAgent();
  });
  after(async () => {
    await agent.stop();
  });

  it("is package.json's in `warren version` and `warren --version`", async () => {
    for (const command of ['version', '--version']) {
      const r = await run(process.execPath, [WARREN_BIN, command]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `warren ${PACKAGE_VERSION}\n`);
    }
  });

  it("is package.json's in the agent's /v1/status", async () => {
    const status = await new ApiClient({ socket: agent.socket, timeoutMs: 10_000 }).status();
    assert.equal(status.version, PACKAGE_VERSION);
  });
});

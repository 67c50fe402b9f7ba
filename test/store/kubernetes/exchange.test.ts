/**
 * The HTTP/1.1 exchange of the Kubernetes API client (src/store/kubernetes/exchange.ts) stopped by
 * its signal. Found by the soak on the kubernetes store (seed 3838, `npm run soak -- --store
 * kubernetes --seed 3838 --faults 300 --nodes 3`): an agent died of an uncaught AbortError when a
 * watch was stopped on its ERROR line (410 after the API server was restored) in the very chunk
 * that ended a kept-alive answer. Each case runs many exchanges, as the race needs no more than the
 * server ending the answer with the line that stops it.
 */
import assert from 'node:assert/strict';
import { Agent, type Server, createServer } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { openHttp1, readLines } from '../../../src/store/kubernetes/exchange.ts';

const ROUNDS = 100;

describe('an HTTP/1.1 exchange stopped by its signal', () => {
  let server: Server;
  let base: URL;
  const agent = new Agent({ keepAlive: true });
  before(async () => {
    server = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      if (req.url === '/slow') return void res.write('{"type":"ADDED","object":{}}\n'); // never ends
      res.write('{"type":"ADDED","object":{}}\n');
      res.end('{"type":"ERROR","object":{"code":410}}\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = new URL(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
  });
  after(async () => {
    agent.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('does not kill the process when stopped on the last line of a kept-alive answer', async () => {
    let stopped = 0;
    for (let i = 0; i < ROUNDS; i++) {
      const closing = new AbortController();
      const answer = await openHttp1(new URL('/watch', base), 'GET', {}, undefined, agent, closing.signal);
      await readLines(answer.body, (line) => {
        if ((line as { type?: string }).type !== 'ERROR') return;
        stopped += 1;
        closing.abort();
      }).catch(() => undefined); // cut off by the stop, or ended: either is the caller's to judge
    }
    assert.equal(stopped, ROUNDS);
  });

  it('ends a body still coming when stopped (its reader is told), and refuses an exchange stopped before it began', async () => {
    const closing = new AbortController();
    const answer = await openHttp1(new URL('/slow', base), 'GET', {}, undefined, agent, closing.signal);
    const reading = readLines(answer.body, () => closing.abort());
    await assert.rejects(reading, /cut off/);
    const stoppedBefore = AbortSignal.abort();
    await assert.rejects(openHttp1(new URL('/watch', base), 'GET', {}, undefined, agent, stoppedBefore));
  });
});

/**
 * The soak auditor's judgment of a cluster store's records (cluster-holdings.ts) catches what it
 * says it catches, on records written here: claims of two nodes overlapping, a live sandbox's
 * address in no claim of its node and granted to it by none, and an address uncovered only for as
 * long as its node's agent ran past the bound. Times are numbers passed in, never waited for.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ClusterHoldings, UncoveredClock, cidrSpan, overlappingClaims, uncovered } from './cluster-holdings.ts';

const claim = (cidr: string, ...nodes: string[]) => ({ block: `10.0.0.0/24#${cidr}`, cidr, nodes });

describe("the soak auditor's judgment of cluster records", () => {
  it('reads an IPv4 CIDR as its first and last address, and nothing else', () => {
    assert.deepEqual(cidrSpan('10.0.0.4/30'), [167772164, 167772167]);
    assert.deepEqual(cidrSpan('10.0.0.5/32'), [167772165, 167772165]);
    assert.equal(cidrSpan('fd00::/64'), undefined);
    assert.equal(cidrSpan('10.0.0.0/33'), undefined);
  });

  it("finds two nodes' claims sharing an address, and not one node's, nor blocks apart", () => {
    const holdings: ClusterHoldings = {
      claims: [
        claim('10.0.0.0/28', 'n1'),
        claim('10.0.0.8/29', 'n2'),
        claim('10.0.0.16/28', 'n1'),
        claim('10.0.0.16/29', 'n1'),
      ],
      grants: [],
    };
    assert.deepEqual(overlappingClaims(holdings), [
      'claims overlap: 10.0.0.0/24#10.0.0.0/28 (n1) and 10.0.0.0/24#10.0.0.8/29 (n2)',
    ]);
  });

  it("holds a live address to its node's claim (either side of a handover) or a grant to it", () => {
    const holdings: ClusterHoldings = {
      claims: [claim('10.0.0.0/30', 'n1'), claim('10.0.0.4/30', 'n2', 'n1')],
      grants: [{ borrower: 'n2', address: '10.0.0.1', lender: 'n1' }],
    };
    assert.equal(uncovered(holdings, { sandbox: 'a', node: 'n1', address: '10.0.0.2' }), undefined);
    assert.equal(uncovered(holdings, { sandbox: 'b', node: 'n2', address: '10.0.0.1' }), undefined, 'a loan');
    assert.equal(uncovered(holdings, { sandbox: 'c', node: 'n1', address: '10.0.0.5' }), undefined, 'a handover');
    assert.equal(
      uncovered(holdings, { sandbox: 'd', node: 'n2', address: '10.0.0.2' }),
      "n2's live sandbox d holds 10.0.0.2, which its node neither claims nor borrows: it lies in 10.0.0.0/24#10.0.0.0/30, claimed by n1",
    );
    assert.equal(
      uncovered(holdings, { sandbox: 'e', node: 'n1', address: '10.0.0.9' }),
      "n1's live sandbox e holds 10.0.0.9, which its node neither claims nor borrows: no claim holds it",
    );
  });

  it('reports an uncovered address once its agent ran the bound since it was first found, not while the agent was down', () => {
    const clock = new UncoveredClock();
    const none: ClusterHoldings = { claims: [], grants: [] };
    const held = [{ sandbox: 'a', node: 'n1', address: '10.0.0.2' }];
    // The agent is down until 20 s, up from then on.
    const upFrom = 20_000;
    const running = (_node: string, from: number, to: number) => Math.max(0, to - Math.max(from, upFrom));
    assert.deepEqual(clock.judge(none, held, 1_000, 10_000, running), []);
    assert.deepEqual(clock.judge(none, held, 25_000, 10_000, running), [], 'its agent ran 5 s of it');
    const late = clock.judge(none, held, 31_000, 10_000, running);
    assert.equal(late.length, 1);
    assert.match(
      late[0]?.what ?? '',
      /^n1's live sandbox a holds 10\.0\.0\.2, .* \(for 11000 ms of its agent's time\)$/,
    );
    // Claimed again: forgotten; found uncovered again later, its clock starts anew.
    assert.deepEqual(
      clock.judge({ claims: [claim('10.0.0.0/30', 'n1')], grants: [] }, held, 32_000, 10_000, running),
      [],
    );
    assert.deepEqual(clock.judge(none, held, 33_000, 10_000, running), []);
    assert.equal(clock.judge(none, held, 43_000, 10_000, running).length, 1);
    clock.reset(); // the records are not judged from before
    assert.deepEqual(clock.judge(none, held, 44_000, 10_000, running), []);
  });
});

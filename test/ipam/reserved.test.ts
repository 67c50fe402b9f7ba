/**
 * Cluster-wide reservations as the engine sees them (src/ipam/reserved.ts): what an entry reserves,
 * which reservation names an address, and the set a pick skips, built once per pool and set.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseIpamConfig } from '../../src/cni/ipam-config.ts';
import { parseIP } from '../../src/ipam/address.ts';
import { exclusionSet, LedgerState } from '../../src/ipam/ledger-state.ts';
import { ReservedAddresses, malformedEntries, parseReservedEntry, withReservations } from '../../src/ipam/reserved.ts';

const range = (ipam: Record<string, unknown>) => {
  const r = parseIpamConfig({ type: 'warren', ...ipam }).ranges[0];
  assert.ok(r);
  return r;
};
const ip = (text: string) => {
  const parsed = parseIP(text);
  assert.ok(parsed);
  return parsed;
};

describe('ReservedAddresses', () => {
  it('reserves single addresses and whole CIDRs of both families; a CIDR with host bits reserves its network', () => {
    assert.deepEqual(parseReservedEntry('10.0.0.5'), {
      family: 4,
      from: ip('10.0.0.5').value,
      to: ip('10.0.0.5').value,
    });
    assert.deepEqual(parseReservedEntry('10.0.0.5/30'), {
      family: 4,
      from: ip('10.0.0.4').value,
      to: ip('10.0.0.7').value,
    });
    assert.equal(parseReservedEntry('fd00::1/127')?.to, ip('fd00::1').value);
    for (const bad of ['10.0.0', '10.0.0.1/33', 'x', '', '010.0.0.1'])
      assert.equal(parseReservedEntry(bad), undefined, bad);
    assert.deepEqual(malformedEntries({ name: 'r', addresses: ['10.0.0.1', 'nope'] }), ['nope']);
  });

  it('names the first reservation by name holding an address back, and nothing once it is gone', () => {
    const reserved = new ReservedAddresses();
    reserved.replace([
      { name: 'b-wide', addresses: ['10.0.0.0/28'] },
      { name: 'a-one', reason: 'the router', addresses: ['10.0.0.1', 'garbage'] },
    ]);
    assert.equal(reserved.covering(ip('10.0.0.1'))?.name, 'a-one');
    assert.equal(reserved.covering(ip('10.0.0.9'))?.name, 'b-wide');
    assert.equal(reserved.covering(ip('10.0.0.16')), undefined);
    assert.equal(ReservedAddresses.describe(reserved.list()[0] as never), 'WarrenReservation "a-one" (the router)');
    reserved.replace([]);
    assert.equal(reserved.covering(ip('10.0.0.1')), undefined);
    assert.equal(reserved.empty, true);
  });

  it('a pick skips reserved addresses; with nothing reserved the blocking set is the exclusion set itself', () => {
    const r = range({ range: '10.0.0.0/29', exclude: ['10.0.0.2/32'] });
    const reserved = new ReservedAddresses();
    assert.equal(reserved.blocking(r), exclusionSet(r), 'no cost while nothing is reserved');
    reserved.replace([{ name: 'x', addresses: ['10.0.0.1', '10.0.0.3', '192.168.0.0/16'] }]);
    const blocked = reserved.blocking(r);
    assert.equal(reserved.blocking({ ...r }), blocked, 'built once per pool, whatever object names the range');
    const state = new LedgerState();
    const picked: string[] = [];
    for (;;) {
      const pick = state.pick(r, reserved.blocking(r));
      if (pick.kind === 'exhausted') break;
      state.markAllocated(pick.address);
      picked.push(String(pick.address & 0xffn));
    }
    assert.deepEqual(picked, ['4', '5', '6'], '.1 and .3 reserved, .2 excluded, .7 broadcast');
    reserved.replace([{ name: 'x', addresses: ['10.0.0.1'] }]);
    assert.notEqual(reserved.blocking(r), blocked, 'a new set of reservations builds a new set');
  });

  it('judges a requested reserved address as reserved, naming the reservation, after outside and excluded', () => {
    const r = range({ range: '10.0.0.0/29', exclude: ['10.0.0.2/32'] });
    const reserved = new ReservedAddresses();
    reserved.replace([{ name: 'keep', addresses: ['10.0.0.0/24'] }]);
    const by = (value: bigint) => reserved.covering({ family: 4, value });
    const state = new LedgerState();
    assert.deepEqual(state.checkRequest(r, ip('10.0.0.3').value, by), {
      kind: 'reserved',
      reservation: reserved.list()[0],
    });
    assert.equal(state.checkRequest(r, ip('10.0.0.2').value, by).kind, 'excluded');
    assert.equal(state.checkRequest(r, ip('10.0.0.7').value, by).kind, 'outside');
  });

  it('adds the reservations inside a range to its exclusions for what reads exclusions itself (lending)', () => {
    const r = range({ range: '10.0.0.0/29' });
    const reserved = new ReservedAddresses();
    assert.equal(withReservations(r, reserved), r);
    assert.equal(withReservations(undefined, reserved), undefined);
    reserved.replace([{ name: 'x', addresses: ['10.0.0.3', '10.0.1.0/24'] }]);
    assert.deepEqual(withReservations(r, reserved)?.excluded, [[ip('10.0.0.3').value, ip('10.0.0.3').value]]);
  });
});

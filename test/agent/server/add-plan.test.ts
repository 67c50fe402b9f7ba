/**
 * ADD planning through the CNI service: the planners run in the order given, each on the plan the
 * one before answered, the last plan is what is allocated, and a planner's refusal ends the ADD with
 * code 7 and its reason, nothing allocated.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../../src/core/clock.ts';
import { WarrenError } from '../../../src/core/errors.ts';
import { CniService } from '../../../src/agent/server/cni-service.ts';
import type { AddPlanner, PodRef } from '../../../src/agent/server/add-plan.ts';
import { Allocator } from '../../../src/allocator/allocator.ts';
import { parseIP } from '../../../src/ipam/address.ts';
import { SqliteStore } from '../../../src/store/sqlite/store.ts';

function setup(planners: readonly AddPlanner[]) {
  const clock = new ManualClock(1_000_000);
  const store = new SqliteStore({ path: ':memory:' });
  const allocator = new Allocator({ store, clock, node: 'n1' });
  const service = new CniService({ allocator, readiness: async () => undefined, clock, planners });
  return { store, service };
}

const config = { cniVersion: '1.1.0', name: 'wnet', ipam: { type: 'warren', range: '10.241.0.0/24' } };
const add = (service: CniService, args?: string) =>
  service.handle({
    command: 'ADD',
    containerID: 'c1',
    netns: '/var/run/netns/x',
    ifname: 'eth0',
    config,
    ...(args === undefined ? {} : { args }),
  });

describe('ADD planners', () => {
  it('run in order, each on the plan before it, and the last plan is allocated', async () => {
    const seen: string[] = [];
    const pods: Array<PodRef | undefined> = [];
    const first: AddPlanner = async (_conf, pod, plan) => {
      seen.push(`first:${plan.requested.length}`);
      pods.push(pod);
      return { ...plan, requested: [parseIP('10.241.0.7') as NonNullable<ReturnType<typeof parseIP>>] };
    };
    const second: AddPlanner = async (conf, _pod, plan) => {
      seen.push(`second:${conf.name}:${plan.requested.length}`);
      return plan;
    };
    const { service } = setup([first, second]);
    const outcome = await add(service, 'K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=p1;K8S_POD_UID=u1');
    assert.equal(outcome.kind, 'result');
    assert.deepEqual(seen, ['first:0', 'second:wnet:1']);
    assert.deepEqual(pods, [{ namespace: 'ns1', name: 'p1', uid: 'u1' }]);
    assert.match(JSON.stringify(outcome.output), /10\.241\.0\.7\/24/);
  });

  it('pass no pod when CNI_ARGS names none', async () => {
    const pods: Array<PodRef | undefined> = [];
    const { service } = setup([
      async (_conf, pod, plan) => {
        pods.push(pod);
        return plan;
      },
    ]);
    assert.equal((await add(service)).kind, 'result');
    assert.deepEqual(pods, [undefined]);
  });

  it('a refusal ends the ADD with code 7 and its reason, before any later planner, nothing allocated', async () => {
    let laterRan = false;
    const { service, store } = setup([
      async () => {
        throw new WarrenError('INVALID_CONFIG', 'pool p is not for namespace ns1 (namespaceSelector)');
      },
      async (_conf, _pod, plan) => {
        laterRan = true;
        return plan;
      },
    ]);
    const outcome = await add(service, 'K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=p1');
    assert.equal(outcome.kind, 'error');
    assert.equal(outcome.kind === 'error' ? outcome.output.code : 0, 7);
    assert.match(JSON.stringify(outcome.output), /namespaceSelector/);
    assert.equal(laterRan, false);
    assert.deepEqual(await store.list(), []);
  });

  it('refuses a config naming WarrenPools with code 7 when no planner gave it ranges (an agent that reads no pools)', async () => {
    const { service, store } = setup([]);
    const outcome = await service.handle({
      command: 'ADD',
      containerID: 'c1',
      netns: '/var/run/netns/x',
      ifname: 'eth0',
      config: { cniVersion: '1.1.0', name: 'wnet', ipam: { type: 'warren', pools: ['gold'] } },
    });
    assert.equal(outcome.kind, 'error');
    assert.equal(outcome.kind === 'error' ? outcome.output.code : 0, 7);
    assert.match(JSON.stringify(outcome.output), /names WarrenPools \(ipam.pools\), and this agent does not read them/);
    assert.deepEqual(await store.list(), []);
    const check = await service.handle({
      command: 'CHECK',
      containerID: 'c1',
      netns: '/var/run/netns/x',
      ifname: 'eth0',
      config: { cniVersion: '1.1.0', name: 'wnet', ipam: { type: 'warren', pools: ['gold'] } },
    });
    assert.equal(check.kind, 'error', 'CHECK of a pools network holding nothing fails');
  });
});

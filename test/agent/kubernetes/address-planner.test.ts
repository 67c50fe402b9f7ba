/**
 * The "addresses" planner (src/agent/kubernetes/address-planner.ts): the pod annotation
 * `warren.dev/addresses`, read from a real PodDirectory fed a pod listing, honoured or refused with
 * code 7 naming the annotation, the address and why.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isWarrenError } from '../../../src/core/errors.ts';
import { parseIP } from '../../../src/ipam/address.ts';
import { ReservedAddresses } from '../../../src/ipam/reserved.ts';
import { parseNetConf } from '../../../src/cni/netconf.ts';
import { ADDRESSES_ANNOTATION, addressPlanner } from '../../../src/agent/kubernetes/address-planner.ts';
import { PodDirectory } from '../../../src/agent/kubernetes/pod-directory.ts';
import type { AddPlan } from '../../../src/agent/server/add-plan.ts';

const conf = (name = 'blue', ipam: Record<string, unknown> = {}) =>
  parseNetConf(
    {
      cniVersion: '1.0.0',
      name,
      type: 'macvlan',
      ipam: {
        type: 'warren',
        ipRanges: [{ range: '10.0.0.0/24', exclude: ['10.0.0.200/29'], gateway: '10.0.0.1' }, { range: 'fd00::/120' }],
        ...ipam,
      },
    },
    'ADD',
  );

/** A directory holding one pod with `annotation` (none when undefined); counts the GETs a miss makes. */
function directory(annotation: string | undefined) {
  let gets = 0;
  const pods = new PodDirectory({
    fetchPod: async () => {
      gets += 1;
      return undefined;
    },
    fetchNamespace: async () => undefined,
  });
  pods.observePods({
    kind: 'listed',
    objects: [
      {
        metadata: {
          uid: 'u1',
          namespace: 'ns',
          name: 'web-0',
          ...(annotation === undefined ? {} : { annotations: { [ADDRESSES_ANNOTATION]: annotation } }),
        },
        spec: { nodeName: 'n1' },
      },
    ],
  });
  return { pods, gets: () => gets };
}

const ref = { namespace: 'ns', name: 'web-0', uid: 'u1' };
const planOf = (c: ReturnType<typeof conf>, requested: string[] = []): AddPlan => ({
  ranges: c.ipam.ranges,
  requested: requested.map((t) => parseIP(t) as NonNullable<ReturnType<typeof parseIP>>),
});
const texts = (plan: AddPlan) => plan.requested.map((ip) => (ip.family === 4 ? `v4 ${ip.value}` : `v6 ${ip.value}`));

async function refusal(annotation: string, o: { reserved?: ReservedAddresses; requested?: string[] } = {}) {
  const { pods } = directory(annotation);
  const c = conf();
  try {
    await addressPlanner({ pods, reserved: o.reserved })(c, ref, planOf(c, o.requested));
  } catch (error) {
    assert.ok(isWarrenError(error, 'INVALID_CONFIG'), String(error));
    return (error as Error).message;
  }
  assert.fail('the planner honoured it');
}

describe('the addresses planner', () => {
  it('adds the addresses a comma-separated annotation asks for, one per family, with no API request', async () => {
    const { pods, gets } = directory(' 10.0.0.7, fd00::9/120 ');
    const c = conf();
    const plan = await addressPlanner({ pods })(c, ref, planOf(c));
    assert.deepEqual(texts(plan), ['v4 167772167', 'v6 ' + (parseIP('fd00::9')?.value ?? 0n)]);
    assert.equal(plan.ranges, c.ipam.ranges, 'the ranges are left as planned');
    assert.equal(gets(), 0, 'the pod came from the watch');
  });

  it('reads a JSON object by the network name and leaves other networks as planned', async () => {
    const { pods } = directory(JSON.stringify({ blue: ['10.0.0.9'], red: '192.168.0.4' }));
    const blue = conf('blue');
    assert.deepEqual(texts(await addressPlanner({ pods })(blue, ref, planOf(blue))), ['v4 167772169']);
    const green = conf('green');
    const untouched = planOf(green);
    assert.equal(await addressPlanner({ pods })(green, ref, untouched), untouched);
  });

  it('leaves the plan alone without a pod, without the annotation, or for a pod not found', async () => {
    const c = conf();
    const plan = planOf(c);
    assert.equal(await addressPlanner({ pods: directory('10.0.0.7').pods })(c, undefined, plan), plan);
    assert.equal(await addressPlanner({ pods: directory(undefined).pods })(c, ref, plan), plan);
    const { pods, gets } = directory('10.0.0.7');
    assert.equal(await addressPlanner({ pods })(c, { ...ref, name: 'gone' }, plan), plan);
    assert.equal(gets(), 1, 'a miss is one GET');
  });

  it('plans as configured, and says so, for a pod neither cached nor readable (the API server away)', async () => {
    const pods = new PodDirectory({
      fetchPod: () => Promise.reject(new Error('connect ECONNREFUSED')),
      fetchNamespace: async () => undefined,
    });
    const told: string[] = [];
    const c = conf();
    const plan = planOf(c);
    const planner = addressPlanner({ pods, onUnreadable: (p, e) => told.push(`${p.name}: ${(e as Error).message}`) });
    assert.equal(await planner(c, ref, plan), plan);
    assert.deepEqual(told, ['web-0: connect ECONNREFUSED']);
  });

  it('keeps an address CNI_ARGS or the config asked for too, and refuses another of the same family', async () => {
    const { pods } = directory('10.0.0.7');
    const c = conf();
    assert.deepEqual(texts(await addressPlanner({ pods })(c, ref, planOf(c, ['10.0.0.7']))), ['v4 167772167']);
    assert.match(
      await refusal('10.0.0.7', { requested: ['10.0.0.8'] }),
      /asks \(annotation warren\.dev\/addresses\) for 10\.0\.0\.7, but the network config or CNI_ARGS asks for 10\.0\.0\.8/,
    );
  });

  it('refuses a malformed annotation with code 7 naming the annotation and the pod', async () => {
    for (const [text, why] of [
      ['10.0.0.300', /"10\.0\.0\.300", which is not an IP address/],
      ['10.0.0.7,10.0.0.8', /two IPv4 addresses \(10\.0\.0\.7, 10\.0\.0\.8\); one per family/],
      ['{"blue": 7}', /names network "blue" with neither a list of addresses nor a string/],
      ['{not json', /is not a JSON object/],
      [' , ', /names no address/],
    ] as const) {
      const message = await refusal(text);
      assert.match(message, /^pod ns\/web-0: annotation warren\.dev\/addresses /, message);
      assert.match(message, why, message);
    }
  });

  it('refuses an address outside every range, excluded, the gateway, or reserved, saying which', async () => {
    assert.match(
      await refusal('10.9.9.9'),
      /for 10\.9\.9\.9, which is outside every range of the network \(10\.0\.0\.1-10\.0\.0\.254, fd00::1-fd00::ff\)/,
    );
    assert.match(await refusal('10.0.0.201'), /for 10\.0\.0\.201, which is excluded from /);
    assert.match(await refusal('10.0.0.1'), /for 10\.0\.0\.1, which is the gateway of /);
    const reserved = new ReservedAddresses();
    reserved.replace([{ name: 'vip', reason: 'the load balancer', addresses: ['10.0.0.50/31'] }]);
    assert.match(
      await refusal('10.0.0.51', { reserved }),
      /for 10\.0\.0\.51, which is reserved by WarrenReservation "vip" \(the load balancer\)/,
    );
  });
});

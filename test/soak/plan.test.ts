/**
 * The soak's plan with the store seam: a store without faults of its own (SQLite) gets the plans
 * it got before the seam (seed 3801's, the short soak's, pinned by its digest), and a store's own
 * faults are drawn by its planner from the plan's generator, so a plan stays a pure function of
 * the seed and the options, its store ends whole, and a prefix is the plan of a shorter run. The
 * workload's extra kinds (StatefulSet re-creation, a node lost and forgotten) are drawn only when
 * asked for, so the pinned plan stays as drawn.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { type PlanOptions, type Step, isFault, planSoak } from './plan.ts';
import type { StorePlan, StoreStep } from './store.ts';

const SHORT_SOAK: PlanOptions = { seed: 3801, nodes: 2, faults: 24, podsPerNode: 12, operationsPerFault: 6 };

/** A store that may be stopped (started again two operations later) or have a watch cut. */
const toyStore: StorePlan = {
  share: 0.5,
  planner() {
    let downFor: number | undefined;
    const step = (action: string, fault: boolean): StoreStep => ({ kind: 'store', action, fault });
    return {
      fault(random) {
        if (downFor !== undefined) return [];
        if (random.chance(0.5)) return [step('watch-cut', true)];
        downFor = 2;
        return [step('stop', true)];
      },
      due() {
        if (downFor === undefined) return [];
        if (downFor-- > 0) return [];
        downFor = undefined;
        return [step('start', false)];
      },
      end() {
        const last = downFor === undefined ? [] : [step('start', false)];
        downFor = undefined;
        return last;
      },
    };
  },
};

describe('the soak plan and the store seam', () => {
  it("gives a store without faults of its own the plan it had before the seam (seed 3801's)", () => {
    const steps = planSoak(SHORT_SOAK);
    assert.equal(steps.length, 206);
    assert.equal(
      createHash('sha256').update(JSON.stringify(steps)).digest('hex'),
      '1672698ceecef6007fa7abc993811c243256aee883b337a945b1441f4e8cce26',
    );
  });

  it("draws the store's own faults from the seed, counted among the faults, the store whole at the end", () => {
    const options: PlanOptions = { ...SHORT_SOAK, faults: 60, store: toyStore };
    const steps = planSoak(options);
    assert.deepEqual(planSoak(options), steps, 'a pure function of the seed and the options');
    const storeSteps = steps.filter((s): s is StoreStep => s.kind === 'store');
    assert.ok(storeSteps.some((s) => s.action === 'stop') && storeSteps.some((s) => s.action === 'watch-cut'));
    // A restore is one fault of two steps (the kill, then the directory put back).
    const restores = steps.filter((s) => s.kind === 'restore-state').length;
    assert.equal(steps.filter(isFault).length - restores, 60);
    let down = false;
    for (const s of storeSteps) {
      if (s.action === 'stop') {
        assert.equal(down, false, 'never stopped twice');
        down = true;
      }
      if (s.action === 'start') down = false;
    }
    assert.equal(down, false, 'the plan ends with the store started');
  });

  it("draws the nodes' own faults only when asked: clocks within a day, a full disk freed before anything else befalls its node", () => {
    const options: PlanOptions = { ...SHORT_SOAK, faults: 400, nodeFaults: ['clock', 'disk'] };
    const steps = planSoak(options);
    assert.deepEqual(planSoak(options), steps, 'a pure function of the seed and the options');
    const offsets = new Map<number, number>();
    const full = new Set<number>();
    for (const step of steps) {
      if (step.kind === 'clock-step') {
        const offset = (offsets.get(step.node) ?? 0) + step.seconds;
        assert.ok(Math.abs(offset) <= 86_400, `node ${step.node}'s clock ${offset} s off`);
        offsets.set(step.node, offset);
      } else if (step.kind === 'disk-full') {
        assert.ok(!full.has(step.node), 'filled twice');
        full.add(step.node);
      } else if (step.kind === 'disk-freed') {
        assert.ok(full.delete(step.node), 'freed while not full');
      } else if ('node' in step && step.kind !== 'create') {
        assert.ok(!full.has(step.node), `${step.kind} of node ${step.node} while its disk is full`);
      }
    }
    assert.deepEqual([...full], [], 'every disk freed by the end');
    assert.ok(steps.some((s) => s.kind === 'clock-step') && steps.some((s) => s.kind === 'disk-full'));
    assert.equal(steps.filter(isFault).length - steps.filter((s) => s.kind === 'restore-state').length, 400);
  });

  it("deletes a node's state directory only when asked, right after its agent's kill, and leaves the plans asked for the others as drawn", () => {
    const options: PlanOptions = { ...SHORT_SOAK, faults: 400, nodeFaults: ['clock', 'disk'] };
    const digest = (steps: Step[]) => createHash('sha256').update(JSON.stringify(steps)).digest('hex');
    assert.equal(
      digest(planSoak(options)),
      'ee95b10ce89608ff11b78442508d606953e1f092252da069396fa7feac886e5c',
      'the plan drawn before the wipe was one',
    );
    const steps = planSoak({ ...options, nodeFaults: ['clock', 'disk', 'wipe'] });
    const wipes = steps.flatMap((s, i) => (s.kind === 'wipe-state' ? [i] : []));
    assert.ok(wipes.length >= 5, `${wipes.length} wipes in 400 faults`);
    for (const i of wipes) {
      const [kill, wipe] = [steps[i - 1], steps[i]];
      assert.ok(kill?.kind === 'kill' && wipe?.kind === 'wipe-state' && kill.node === wipe.node, `step ${i}`);
      const start = steps.slice(i).find((s) => s.kind === 'start' && s.node === wipe.node);
      assert.ok(start, `node ${wipe.node} started again after its wipe at step ${i}`);
    }
    const twoSteps = steps.filter((s) => s.kind === 'restore-state' || s.kind === 'wipe-state').length;
    assert.equal(steps.filter(isFault).length - twoSteps, 400, 'one fault of two steps: the kill, then the wipe');
  });

  it('re-creates a pod only when asked: a pod alive, under its name, on its node or another, DELed or forced', () => {
    const options: PlanOptions = { ...SHORT_SOAK, faults: 200, workload: ['recreate'] };
    const steps = planSoak(options);
    assert.deepEqual(planSoak(options), steps, 'a pure function of the seed and the options');
    const recreates = steps.filter((s) => s.kind === 'recreate');
    assert.ok(recreates.some((s) => s.forced) && recreates.some((s) => !s.forced), 'both DELed and force-deleted');
    const nodeOf = new Map<number, number>();
    let moved = 0;
    for (const step of steps) {
      if (step.kind === 'create') {
        assert.ok(!nodeOf.has(step.pod), `pod ${step.pod} created twice`);
        nodeOf.set(step.pod, step.node);
      } else if (step.kind === 'recreate') {
        const from = nodeOf.get(step.pod);
        assert.ok(from !== undefined, `pod ${step.pod} re-created while not alive`);
        if (from !== step.node) moved += 1;
        nodeOf.set(step.pod, step.node);
      } else if (step.kind === 'delete' || step.kind === 'force-delete') {
        assert.ok(nodeOf.delete(step.pod), `pod ${step.pod} deleted while not alive`);
      } else if (step.kind === 'crash-loop') {
        assert.ok(nodeOf.has(step.pod), `pod ${step.pod} crash-looped while not alive`);
      }
    }
    assert.ok(moved > 0, 'some replicas rescheduled on another node');
    for (let node = 0; node < SHORT_SOAK.nodes; node++)
      assert.ok(
        [...nodeOf.values()].filter((n) => n === node).length <= SHORT_SOAK.podsPerNode,
        'a node over its pods',
      );
    assert.equal(steps.filter(isFault).length - steps.filter((s) => s.kind === 'restore-state').length, 200);
  });

  it('loses a node only when asked: one at a time, nothing on it until it is forgotten from a node up and back', () => {
    const options: PlanOptions = { ...SHORT_SOAK, nodes: 3, faults: 400, workload: ['node-lost'] };
    const steps = planSoak(options);
    assert.deepEqual(planSoak(options), steps, 'a pure function of the seed and the options');
    assert.ok(steps.filter((s) => s.kind === 'node-lost').length >= 2, 'nodes lost');
    assert.deepEqual(
      planSoak({ ...options, nodes: 1 }).filter((s) => s.kind === 'node-lost'),
      [],
      'never the only node',
    );
    const down = new Set<number>();
    const podNode = new Map<number, number>();
    let lost: { node: number; forgotten: boolean } | undefined;
    const touches = (step: Step): number | undefined => {
      if (step.kind === 'create' || step.kind === 'recreate') return step.node;
      if ('pod' in step) return podNode.get(step.pod);
      if (step.kind === 'store' || step.kind === 'node-forget' || step.kind === 'node-return') return undefined;
      return step.node;
    };
    for (const step of steps) {
      if (lost !== undefined)
        assert.notEqual(touches(step), lost.node, `${JSON.stringify(step)} befell lost node ${lost.node}`);
      if ('pod' in step && step.kind !== 'create')
        assert.ok(podNode.has(step.pod), `pod ${step.pod}, gone with its node, operated on`);
      switch (step.kind) {
        case 'create':
        case 'recreate':
          podNode.set(step.pod, step.node);
          break;
        case 'delete':
        case 'force-delete':
          podNode.delete(step.pod);
          break;
        case 'kill':
          down.add(step.node);
          break;
        case 'start':
          down.delete(step.node);
          break;
        case 'node-lost':
          assert.equal(lost, undefined, 'one node lost at a time');
          assert.ok(down.size < options.nodes - 1, 'never the last node up');
          lost = { node: step.node, forgotten: false };
          for (const [pod, node] of podNode) if (node === step.node) podNode.delete(pod);
          break;
        case 'node-forget':
          assert.equal(lost?.node, step.node, 'the lost node forgotten');
          assert.equal(lost?.forgotten, false, 'forgotten once');
          assert.ok(step.from !== step.node && !down.has(step.from), 'asked of a node up');
          lost = { node: step.node, forgotten: true };
          break;
        case 'node-return':
          assert.equal(lost?.node, step.node);
          assert.equal(lost?.forgotten, true, 'back only once forgotten');
          lost = undefined;
          break;
        default:
          break;
      }
    }
    assert.equal(lost, undefined, 'every node lost is back by the end');
    assert.deepEqual([...down], [], 'every node started by the end');
    assert.equal(steps.filter(isFault).length - steps.filter((s) => s.kind === 'restore-state').length, 400);
  });
});

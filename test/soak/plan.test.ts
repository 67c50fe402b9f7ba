/**
 * The soak's plan with the store seam: a store without faults of its own (SQLite) gets the plans
 * it got before the seam (seed 3801's, the short soak's, pinned by its digest), and a store's own
 * faults are drawn by its planner from the plan's generator, so a plan stays a pure function of
 * the seed and the options, its store ends whole, and a prefix is the plan of a shorter run.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { type PlanOptions, isFault, planSoak } from './plan.ts';
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
});

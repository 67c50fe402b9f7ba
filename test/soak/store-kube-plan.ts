/**
 * The kubernetes store's own faults in the soak's plan (store.ts `StorePlan`), drawn from the
 * plan's generator, against a model of what was planned (the API server stopped, a snapshot taken,
 * a restore not yet followed by the recovery procedure), never of what happened:
 * - `api-stop` (arg 0: the port refuses connections, as while an apiserver restarts; 1: every
 *   request answered 503, as a load balancer in front of a down apiserver), then `api-start` 1-4
 *   operations later;
 * - `watch-cut` (arg 0: every watch stream cut mid-stream; 1: every client connection cut, requests
 *   in flight with them; 2: the history compacted, as the apiserver's compactor does, and every watch
 *   cut: each resumes from a compacted resourceVersion and is answered 410 Gone);
 * - `api-snapshot` (not a fault: the API server's etcd saved, as `etcdctl snapshot save`), drawn
 *   now and then while none is kept; `api-restore` (the etcd restored from it and the apiserver
 *   restarted: objects made since gone, resourceVersions back, watches answered 410), then
 *   `api-recover` 1-3 operations later (the operator follows docs/recovery.md);
 * - `claim-delete` (a WarrenBlock deleted by hand, `kubectl delete warrenblock`; arg picks which,
 *   among the blocks whose owner's agent runs, when the step runs);
 * - `publication-delete` (a WarrenBlockPublication deleted by hand, `kubectl delete
 *   warrenblockpublication`; arg picks which, among the blocks whose owner's agent runs, when the
 *   step runs);
 * - `claim-edit` (a WarrenBlock edited by hand to name another node, its `spec.node` and node label,
 *   as `kubectl edit` by someone moving it; arg picks which block and which other running node);
 * - `lease-delete` (a node's Lease deleted by hand, `kubectl delete lease`; arg picks which running
 *   node): its agent stops allocating, as for a store that lost its data, and the operator follows
 *   the recovery procedure at `api-recover` 1-3 operations later.
 *
 * Guarantees: the API server is never stopped twice, nor restored while stopped or in recovery; a
 * restore is drawn only with a snapshot kept, and uses it up; the plan ends with the API server up
 * and every restore followed by its recovery.
 */
import type { StorePlan, StoreStep } from './store.ts';

/** The actions of the kubernetes store's steps, as store-kube.ts runs them. */
export type KubeAction =
  | 'api-stop'
  | 'api-start'
  | 'watch-cut'
  | 'api-snapshot'
  | 'api-restore'
  | 'api-recover'
  | 'claim-delete'
  | 'publication-delete'
  | 'claim-edit'
  | 'lease-delete';

/** How often a snapshot is drawn after an operation while none is kept. */
const SNAPSHOT_CHANCE = 0.04;

function step(action: KubeAction, fault: boolean, arg?: number): StoreStep {
  return { kind: 'store', action, fault, ...(arg === undefined ? {} : { arg }) };
}

export const kubePlan: StorePlan = {
  share: 0.4,
  planner() {
    /** Operations left before the stopped API server is started; undefined while it runs. */
    let downFor: number | undefined;
    /** Operations left before the recovery procedure; undefined when no restore waits for it. */
    let recoverIn: number | undefined;
    let snapshotKept = false;
    return {
      fault(random) {
        if (downFor !== undefined || recoverIn !== undefined) return [];
        const kind = random.weighted({
          'api-stop': 3,
          'watch-cut': 3,
          'api-restore': snapshotKept ? 1.5 : 0,
          'claim-delete': 2,
          'publication-delete': 1,
          'claim-edit': 1,
          'lease-delete': 1,
        });
        switch (kind) {
          case 'api-stop':
            downFor = random.int(1, 4);
            return [step('api-stop', true, random.int(0, 1))];
          case 'watch-cut':
            return [step('watch-cut', true, random.int(0, 2))];
          case 'api-restore':
            snapshotKept = false;
            recoverIn = random.int(1, 3);
            return [step('api-restore', true)];
          case 'claim-delete':
          case 'publication-delete':
          case 'claim-edit':
            return [step(kind, true, random.int(0, 999))];
          case 'lease-delete':
            recoverIn = random.int(1, 3);
            return [step('lease-delete', true, random.int(0, 999))];
          default: {
            const never: never = kind;
            throw new Error(`unknown kubernetes fault ${String(never)}`);
          }
        }
      },
      due(random) {
        const steps: StoreStep[] = [];
        if (downFor !== undefined && downFor-- <= 0) {
          downFor = undefined;
          steps.push(step('api-start', false));
        }
        if (recoverIn !== undefined && recoverIn-- <= 0) {
          recoverIn = undefined;
          steps.push(step('api-recover', false));
        }
        if (!snapshotKept && downFor === undefined && random.chance(SNAPSHOT_CHANCE)) {
          snapshotKept = true;
          steps.push(step('api-snapshot', false));
        }
        return steps;
      },
      end() {
        const steps: StoreStep[] = [];
        if (downFor !== undefined) steps.push(step('api-start', false));
        if (recoverIn !== undefined) steps.push(step('api-recover', false));
        downFor = undefined;
        recoverIn = undefined;
        return steps;
      },
    };
  },
};

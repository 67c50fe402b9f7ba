/**
 * The ClusterRole in deploy/ grants exactly what the agent's code calls: every Kubernetes API call
 * in src/ is listed here by the pattern that finds it, each with the (verb, resource) it needs, and
 * the role's rules must equal the set the code uses. A new call without a rule, or a rule no code
 * uses, fails this test.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { loadAllYaml } from '@kubernetes/client-node';
import { REPO } from '../helpers/processes.ts';

/** How each call appears in the code, and what it needs. `list-watch` sources list and watch a collection path. */
const CALLS: ReadonlyArray<{ pattern: RegExp; needs: ReadonlyArray<string> }> = [
  { pattern: /path: '\/api\/v1\/pods'/, needs: ['list pods', 'watch pods'] },
  { pattern: /path: '\/api\/v1\/nodes'/, needs: ['list nodes', 'watch nodes'] },
  { pattern: /\.readNamespacedPod\(/, needs: ['get pods'] },
  { pattern: /\.readNode\(/, needs: ['get nodes'] },
  { pattern: /\.createNamespacedEvent\(/, needs: ['create events'] },
  { pattern: /\.patchNamespacedEvent\(/, needs: ['patch events'] },
];
/** Any other client-node call on CoreV1Api would show up here and must be added to CALLS. */
const ANY_CALL =
  /\.(?:read|list|create|patch|replace|delete|watch)(?:Namespaced)?(?:Pod|Node|Event|Namespace|Secret|ConfigMap|Service|Endpoints?|Lease)\w*\(/g;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe('the ClusterRole', () => {
  it('grants exactly the verbs the code calls, on exactly those resources', () => {
    const used = new Set<string>();
    for (const file of sources(join(REPO, 'src'))) {
      const text = readFileSync(file, 'utf8');
      for (const call of CALLS) if (call.pattern.test(text)) for (const need of call.needs) used.add(need);
      if (!text.includes('@kubernetes/client-node')) continue;
      for (const m of text.matchAll(ANY_CALL)) {
        assert.ok(
          CALLS.some((c) => c.pattern.test(m[0])),
          `${file}: ${m[0]} is a Kubernetes API call this test does not know; add it to CALLS with the verb it needs`,
        );
      }
    }
    const role = loadAllYaml(readFileSync(join(REPO, 'deploy', '02-clusterrole.yaml'), 'utf8')).find(
      (o) => (o as { kind?: string }).kind === 'ClusterRole',
    ) as {
      rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>;
    };
    const granted = new Set<string>();
    for (const rule of role.rules) {
      assert.deepEqual(rule.apiGroups, [''], 'only the core API group');
      for (const resource of rule.resources) for (const verb of rule.verbs) granted.add(`${verb} ${resource}`);
    }
    assert.deepEqual([...granted].sort(), [...used].sort());
  });
});

/**
 * Failpoints: named places in the agent's crash windows where a fault test may make the agent
 * die at once, as kill -9 would, exactly there (etcd's gofail and FoundationDB's BUGGIFY serve
 * the same end). A kill at a random moment rarely lands between two writes that must both
 * happen; a failpoint lands there every time, so the soak and the fault tests prove that what
 * the agent does after such a death (a claim in the cluster that its file never recorded, a
 * release whose journal file stayed) keeps every address once and leaks none.
 *
 * Armed only by the environment the agent starts with, read once as it starts (`armFailpoints`):
 *   WARREN_FAILPOINTS=claim-unrecorded@2,journal-unacknowledged
 * makes the agent kill itself the 2nd time it reaches `claim-unrecorded`, or the 1st time it
 * reaches `journal-unacknowledged`. Unset (always, outside fault tests), `failpoint` does nothing
 * but look up an empty table. A name the table does not know is refused at start, naming it.
 */
import { WarrenError } from './errors.ts';

/** The crash windows, each between two writes that a death may split. */
export const FAILPOINTS = {
  /** A block claimed in the cluster, not yet recorded in this node's file. */
  'claim-unrecorded': 'a block claimed in the cluster, not yet recorded in the node file',
  /** A block changed in this node's file, its picture not yet written to the cluster. */
  'publication-unwritten': 'a block changed in the node file, its picture not yet published',
  /** Addresses set aside in the lender's file for a loan, the grant not yet written to the cluster. */
  'loan-ungranted': 'addresses set aside for a loan, the grant not yet written',
  /** A loan's grant written to the cluster, not yet noted by the lender (its note is in memory). */
  'loan-unnoted': 'a grant written, not yet noted by the lender',
  /** A journaled DEL applied, its journal file not yet removed. */
  'journal-unacknowledged': 'a journaled DEL released, its journal file not yet removed',
} as const;

export type FailpointName = keyof typeof FAILPOINTS;

/** The environment variable that arms failpoints. */
export const FAILPOINTS_ENV = 'WARREN_FAILPOINTS';

/** Each armed failpoint → how many more times it is passed before it fires; none until `armFailpoints`. */
let armed = new Map<FailpointName, number>();

/** Arms what the environment names (the agent, as it starts). Throws naming a bad entry. */
export function armFailpoints(env: NodeJS.ProcessEnv = process.env): void {
  armed = parseFailpoints(env[FAILPOINTS_ENV] ?? '');
}

/** `name[@n],...` → each name and the hit it fires on (1 when no `@n`). Throws naming a bad entry. */
export function parseFailpoints(text: string): Map<FailpointName, number> {
  const table = new Map<FailpointName, number>();
  for (const entry of text
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '')) {
    const [name = '', hit = '1'] = entry.split('@');
    if (!Object.hasOwn(FAILPOINTS, name))
      throw new WarrenError(
        'INVALID_CONFIG',
        `${FAILPOINTS_ENV}: no failpoint ${JSON.stringify(name)} (known: ${Object.keys(FAILPOINTS).join(', ')})`,
      );
    const n = Number(hit);
    if (!Number.isSafeInteger(n) || n < 1)
      throw new WarrenError('INVALID_CONFIG', `${FAILPOINTS_ENV}: ${entry}: the hit must be a whole number ≥ 1`);
    table.set(name as FailpointName, n);
  }
  return table;
}

/** The agent dies here, as kill -9 makes it, when this failpoint is armed and its hit has come. */
export function failpoint(name: FailpointName): void {
  if (armed.size === 0) return;
  const left = armed.get(name);
  if (left === undefined) return;
  if (left > 1) {
    armed.set(name, left - 1);
    return;
  }
  process.stderr.write(`warren: failpoint ${name} (${FAILPOINTS[name]}): dying as kill -9 would\n`);
  process.kill(process.pid, 'SIGKILL');
}

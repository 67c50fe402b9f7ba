/**
 * The commands about addresses held: `warren allocations` (with filters; read from the agent a
 * page at a time, so the agent never builds the whole answer; `--cluster`: every node's, as their
 * owners published them, on the Kubernetes store, streamed: cluster-listing.ts), `warren release` (one
 * address, or what a container holds) and `warren audit` (judge every allocation; --fix releases
 * what is provably stale). A container is named by its ID or a unique prefix, as tables show it;
 * `release` takes a prefix only with `--prefix` (it is destructive: `c` must not release `c1`).
 */
import { parseArgs } from 'node:util';
import { defined } from '../core/defined.ts';
import { WarrenError, isWarrenError } from '../core/errors.ts';
import type { ApiClient } from '../api/client.ts';
import type { Allocation, AllocationQuery, AuditReport, ReleaseRequest } from '../api/protocol.ts';
import { COMMON, type CliContext } from './context.ts';
import { ALLOCATION_HEADERS, allocationRow, streamClusterAllocations } from './cluster-listing.ts';
import { jsonText, safe, table } from './format.ts';
import type { CliIO } from './io.ts';
import { UsageError } from './usage.ts';

export async function allocationsCommand(argv: readonly string[], io: CliIO, context: CliContext): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      ...COMMON,
      pool: { type: 'string' },
      network: { type: 'string' },
      container: { type: 'string' },
      ifname: { type: 'string' },
      namespace: { type: 'string' },
      pod: { type: 'string' },
      'pod-uid': { type: 'string' },
      node: { type: 'string' },
      address: { type: 'string' },
      cluster: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const query: AllocationQuery = {
    pool: values.pool,
    network: values.network,
    ifname: values.ifname,
    podNamespace: values.namespace,
    podName: values.pod,
    podUID: values['pod-uid'],
    node: values.node,
    address: values.address,
  };
  const agent = context.client(values.socket);
  if (values.cluster)
    return streamClusterAllocations(
      agent,
      query,
      { json: values.json, container: values.container, resolve: resolveContainer },
      io,
    );
  let list = await allPages(agent, query);
  if (values.container !== undefined) {
    // Resolved among what the other filters select: one request, and a prefix need only be
    // unique there.
    const id = resolveContainer(list, values.container);
    list = list.filter((a) => a.containerID === id);
  }
  if (values.json) {
    io.out(jsonText(list));
    return 0;
  }
  if (list.length === 0) {
    io.out('no allocations\n');
    return 0;
  }
  const now = Date.now();
  io.out(
    table(
      ALLOCATION_HEADERS,
      list.map((a) => allocationRow(a, now)),
    ),
  );
  return 0;
}

/**
 * Every allocation of this node the query selects, read a page at a time, in the order the agent
 * lists them whole (pool, then age, then address). An agent from before pages (it refuses `limit`
 * as an unknown filter) is asked for the whole list instead. (--cluster streams: cluster-listing.ts.)
 */
async function allPages(agent: ApiClient, query: AllocationQuery): Promise<Allocation[]> {
  const all: Allocation[] = [];
  try {
    for await (const a of agent.allAllocations(query)) all.push(a);
  } catch (error) {
    if (!isWarrenError(error, 'BAD_REQUEST') || !/unknown filter "limit"/.test(error.message)) throw error;
    return agent.allocations(query);
  }
  return all.sort((x, y) => compare(x.pool, y.pool) || x.createdAt - y.createdAt || compare(x.address, y.address));
}

function compare(x: string, y: string): number {
  return x < y ? -1 : x > y ? 1 : 0;
}

export async function releaseCommand(argv: readonly string[], io: CliIO, context: CliContext): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      ...COMMON,
      pool: { type: 'string' },
      address: { type: 'string' },
      container: { type: 'string' },
      prefix: { type: 'boolean', default: false },
      network: { type: 'string' },
      ifname: { type: 'string' },
      force: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const force = values.force ? { force: true } : {};
  const agent = context.client(values.socket);
  let request: ReleaseRequest;
  if (values.address !== undefined) {
    if (values.container !== undefined) throw new UsageError('release takes --address or --container, not both');
    if (values.prefix) throw new UsageError('--prefix goes with --container');
    request = { address: values.address, ...defined({ pool: values.pool }), ...force };
  } else if (values.container !== undefined) {
    const scope = {
      ...defined({ network: values.network, ifname: values.ifname }),
    };
    const allocations = await agent.allocations(scope);
    // Releasing is destructive: a prefix stands for an ID only when the operator says so, so a
    // short ID (c) never releases a longer one (c1) that happens to begin with it.
    request = {
      containerID: values.prefix
        ? resolveContainer(allocations, values.container)
        : exactContainer(allocations, values.container),
      ...scope,
      ...force,
    };
  } else {
    throw new UsageError('release needs --address or --container');
  }
  const result = await agent.release(request);
  if (values.json) {
    io.out(jsonText(result));
    return 0;
  }
  if (result.released.length === 0) io.out('nothing to release: no matching allocation\n');
  for (const a of result.released)
    io.out(safe`released ${a.address} from ${a.pool} (container ${a.containerID}, ${a.ifname})\n`);
  return 0;
}

/**
 * The container a --container value names among `allocations`: the ID itself when one has it,
 * else the one ID it begins, as podman and docker take a unique prefix (the tables show 16
 * characters). A prefix of several IDs is refused with the IDs listed; a value that begins none
 * comes back as it is, to match nothing.
 */
function resolveContainer(allocations: readonly Allocation[], given: string): string {
  const ids = [...new Set(allocations.map((a) => a.containerID))];
  if (given === '' || ids.includes(given)) return given;
  const matches = ids.filter((id) => id.startsWith(given)).sort();
  if (matches.length > 1) {
    throw new WarrenError(
      'BAD_REQUEST',
      `container "${given}" is the beginning of ${matches.length} container IDs; give more of it: ` +
        `${matches.join(', ')}`,
    );
  }
  return matches[0] ?? given;
}

/**
 * The --container value of a release without --prefix: an ID as given. One that is no container's
 * ID but begins some is refused, naming them and --prefix; one that begins none matches nothing.
 */
function exactContainer(allocations: readonly Allocation[], given: string): string {
  const ids = [...new Set(allocations.map((a) => a.containerID))];
  if (given === '' || ids.includes(given)) return given;
  const begun = ids.filter((id) => id.startsWith(given)).sort();
  if (begun.length > 0) {
    const which =
      begun.length === 1 ? `the container ID ${begun[0]}` : `${begun.length} container IDs: ${begun.join(', ')}`;
    throw new WarrenError(
      'BAD_REQUEST',
      `no container has the ID "${given}"; it is the beginning of ${which}. Give the whole ID, or add ` +
        `--prefix to release by a unique prefix`,
    );
  }
  return given;
}

export async function auditCommand(argv: readonly string[], io: CliIO, context: CliContext): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: { ...COMMON, fix: { type: 'boolean', default: false } },
    strict: true,
  });
  const report = await context.client(values.socket).audit({ fix: values.fix });
  const code = auditExit(report);
  if (values.json) {
    io.out(jsonText(report));
    return code;
  }
  const lines = [
    safe`audit at ${report.at}: ${report.counts.healthy} healthy, ${report.counts.stale} stale, ` +
      safe`${report.counts.suspect} suspect`,
  ];
  lines.push(safe`journal ${report.sources.journal.dir}: ${report.sources.journal.pending} pending`);
  for (const d of report.sources.netns)
    lines.push(
      d.observable
        ? safe`netns ${d.dir}: observable`
        : safe`netns ${d.dir}: NOT observable (${d.reason}); nothing is released on its account`,
    );
  io.out(`${lines.join('\n')}\n`);
  if (report.findings.length > 0) {
    io.out(
      table(
        ['VERDICT', 'ADDRESS', 'POOL', 'CONTAINER', 'IF', 'WHY'],
        report.findings.map((f) => [
          f.verdict.kind === 'suspect' ? `suspect (${f.verdict.why})` : f.verdict.kind,
          f.allocation.address,
          f.allocation.pool,
          f.allocation.containerID.length > 16 ? f.allocation.containerID.slice(0, 16) : f.allocation.containerID,
          f.allocation.ifname,
          f.verdict.reason,
        ]),
      ),
    );
  }
  if (values.fix) {
    io.out(
      `released ${report.released?.length ?? 0} stale ` +
        `allocation(s)${(report.released ?? []).map((a) => safe`\n  ${a.address} (${a.containerID})`).join('')}\n`,
    );
    for (const e of report.errors ?? []) io.err(safe`could not release ${e}\n`);
    return code;
  }
  if (report.counts.stale > 0) io.out('run `warren audit --fix` to release the stale ones\n');
  return code;
}

/** Exit code of an audit that ran: a release that failed; what is still found; or none of that. */
export const AUDIT_EXIT = { clean: 0, failed: 1, findings: 3 } as const;

/**
 * How an audit ends for scripts: 1 when --fix could not release something, 3 when anything is
 * left to look at — a stale allocation not released (no --fix), or a suspect one (one the node
 * cannot observe included) — and 0 when every allocation is healthy or was released.
 */
export function auditExit(report: AuditReport): number {
  if ((report.errors ?? []).length > 0) return AUDIT_EXIT.failed;
  const released = new Set((report.released ?? []).map((a) => `${a.pool} ${a.address}`));
  const left = report.findings.filter(
    (f) => f.verdict.kind !== 'healthy' && !released.has(`${f.allocation.pool} ${f.allocation.address}`),
  );
  return left.length > 0 ? AUDIT_EXIT.findings : AUDIT_EXIT.clean;
}

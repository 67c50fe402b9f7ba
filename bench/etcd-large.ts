/**
 * The large range of bench/kube-large.ts on store `etcd` (the two-tier store: the node's SQLite file
 * and the etcd tier, src/store/etcd-tier/) on a real etcd: the claims, the node index keys and the
 * publications of SIM_NODES simulated nodes written straight into etcd as their agents would have
 * left them (the tier's key layout and values, etcd-tier/kv.ts), before the live agent starts; then the
 * same figures as on Kubernetes, against the same agent on an empty etcd. The agent's requests are
 * counted by etcd itself: the gRPC messages its server received (`grpc_server_msg_received_total`
 * on the client URL's /metrics), by method, so stream messages (lease keep-alives, watches) count.
 * The old one-tier etcd store stopped at ~41,900 allocations per range (issue 26: every ADD failed).
 * Usage: node bench/etcd-large.ts [--quick] [--allocations N]  (as bench/kube-store.ts --large-only)
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Etcd3 } from 'etcd3';
import { buildPlugin } from '../scripts/build.ts';
import { INSTALLED, install } from '../src/cli/install.ts';
import { blockRecord, nodeIndex, publishedRecord } from '../src/store/etcd-tier/kv.ts';
import { startEtcd } from '../test/helpers/etcd.ts';
import { tempDir } from '../test/helpers/processes.ts';
import { type LargeBackend, largeRangeOn, printLarge, simulatedBlocks } from './kube-large.ts';
import { machineLine } from './machine.ts';
import type { Command } from './plugins.ts';

const PREFIX = '/lbench/';
/** Puts in flight while preloading. */
const IN_FLIGHT = 16;
/** etcd's room: the publications of 1,000,000 allocations are ~340 MB (its default quota is 2 GiB). */
const QUOTA_BYTES = 8 * 1024 ** 3;

/** etcd's count of gRPC messages received, by method (`Range`, `Txn`, `LeaseKeepAlive`, ...). */
async function received(endpoint: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${endpoint}/metrics`)).text();
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^grpc_server_msg_received_total\{.*grpc_method="([^"]+)".*\} (\S+)$/.exec(line);
    if (m !== null) counts.set(m[1] as string, (counts.get(m[1] as string) ?? 0) + Number(m[2]));
  }
  return counts;
}

/** A real etcd as the backend of the large range. */
async function etcdBackend(): Promise<LargeBackend> {
  const etcd = await startEtcd(1, undefined, ['--quota-backend-bytes', String(QUOTA_BYTES)]);
  const endpoint = etcd.endpoints[0] as string;
  let since = new Map<string, number>();
  return {
    async preload(total) {
      if (total === 0) return 0;
      const started = performance.now();
      const client = new Etcd3({ hosts: etcd.endpoints });
      try {
        const ns = client.namespace(PREFIX);
        const blocks = simulatedBlocks(total);
        const worker = async () => {
          for (let next = blocks.next(); !next.done; next = blocks.next()) {
            const { key, node, block } = next.value;
            // The claim and its index key as `claim` writes them, the publication as `publish` does.
            await ns.put(blockRecord(key)).value(JSON.stringify({ node }));
            await ns.put(nodeIndex(node, key)).value(Buffer.alloc(0));
            const { counts, allocations, publishedAt } = block;
            await ns.put(publishedRecord(key)).value(JSON.stringify({ node, counts, allocations, at: publishedAt }));
          }
        };
        await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
      } finally {
        client.close();
      }
      return (performance.now() - started) / 1000;
    },
    agentArgs: () => [
      '--node-name',
      'live',
      '--store',
      'etcd',
      '--etcd-endpoints',
      etcd.endpoints.join(','),
      '--etcd-prefix',
      PREFIX,
    ],
    async mark() {
      since = await received(endpoint);
    },
    async counted() {
      const now = await received(endpoint);
      const out: Record<string, number> = {};
      for (const [method, n] of now) if (n - (since.get(method) ?? 0) > 0) out[method] = n - (since.get(method) ?? 0);
      return out;
    },
    stop: () => etcd.stop(),
  };
}

async function main(): Promise<void> {
  const quick = process.argv.includes('--quick');
  buildPlugin();
  const binDir = tempDir('bench-etcd-large-bin-');
  install({ cniBinDir: binDir, link: true });
  const forwarder: Command = { exe: join(binDir, INSTALLED.forwarder), args: [] };
  console.log(`Store etcd, two tiers (issue 26), ${quick ? 'quick' : 'full'} run. ${machineLine()}`);
  console.log('A real etcd (one member); every ADD goes through the installed forwarder.');
  printLarge(await largeRangeOn(etcdBackend, forwarder, { quick }), {
    into: 'etcd',
    store: 'etcd',
    requests: 'etcd gRPC messages',
  });
  console.log('  (the old one-tier etcd store: every ADD failed from ~41,900 allocations in the range, issue 26)');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();

/**
 * Run as a child (test/store/etcd-tier/watches.test.ts): opens the etcd tier on the endpoint and
 * prefix given, watches a node's claims until synced and says `synced`; at a line on stdin (the
 * parent stopped etcd meanwhile) waits until the watch has lost its stream, closes the watch and the
 * tier, says `closed`, and leaves the process to end by itself: whatever the close left open keeps
 * it running.
 */
import { openEtcdTier } from '../../src/store/etcd-tier/tier.ts';
import { waitFor } from './processes.ts';

const [endpoint = '', prefix = ''] = process.argv.slice(2);
const tier = await openEtcdTier({ endpoints: [endpoint], prefix, leaseSeconds: 15 });
const watch = tier.watchClaims('closer');
await waitFor('the watch synced', () => (watch.seen() === undefined ? undefined : true));
process.stdout.write('synced\n');
process.stdin.once('data', () => {
  process.stdin.destroy();
  void (async () => {
    await waitFor('the watch to lose its stream', () => (watch.seen() === undefined ? true : undefined));
    watch.close();
    await tier.close();
    process.stdout.write('closed\n');
  })();
});

/**
 * The soak's stores by name (`--store`): the one place a backend is registered. A backend not built
 * yet throws when opened or planned, saying so.
 */
import type { StoreBackend, StoreName } from './store.ts';
import { kubernetesBackend } from './store-kube.ts';
import { sqliteBackend } from './store-sqlite.ts';

/** Registration point of the etcd store: replace by the backend of test/soak/store-etcd.ts. */
const etcdBackend: StoreBackend = {
  name: 'etcd',
  open: async () => {
    throw new Error('the soak on the etcd store is not built yet (test/soak/store-etcd.ts)');
  },
};

export const STORES: Readonly<Record<StoreName, StoreBackend>> = {
  sqlite: sqliteBackend,
  kubernetes: kubernetesBackend,
  etcd: etcdBackend,
};

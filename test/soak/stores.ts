/**
 * The soak's stores by name (`--store`): the one place a backend is registered. A backend not built
 * yet throws when opened or planned, saying so.
 */
import type { StoreBackend, StoreName } from './store.ts';
import { etcdBackend } from './store-etcd.ts';
import { sqliteBackend } from './store-sqlite.ts';

/** Registration point of the kubernetes store (test/soak/store-kube.ts). */
const kubernetesBackend: StoreBackend = {
  name: 'kubernetes',
  open: async () => {
    throw new Error('the soak on the kubernetes store is not built yet (test/soak/store-kube.ts)');
  },
};

export const STORES: Readonly<Record<StoreName, StoreBackend>> = {
  sqlite: sqliteBackend,
  kubernetes: kubernetesBackend,
  etcd: etcdBackend,
};

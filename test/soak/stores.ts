/**
 * The soak's stores by name (`--store`): the one place a backend is registered.
 */
import type { StoreBackend, StoreName } from './store.ts';
import { etcdBackend } from './store-etcd.ts';
import { kubernetesBackend } from './store-kube.ts';
import { sqliteBackend } from './store-sqlite.ts';

export const STORES: Readonly<Record<StoreName, StoreBackend>> = {
  sqlite: sqliteBackend,
  kubernetes: kubernetesBackend,
  etcd: etcdBackend,
};

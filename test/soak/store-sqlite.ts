/**
 * The soak on the node's own store (SQLite): no process of its own, no fault of its own, each node
 * its own network name and range (a /27, 30 addresses, so churn reuses addresses soon), nothing in
 * a cluster to audit, nothing kept outside a node's file. Its runs are the soak's runs before the
 * store seam (store.ts): the same plans, the same agents' flags.
 */
import type { SoakStore, StoreBackend } from './store.ts';

const sqliteStore: SoakStore = {
  sharedRange: false,
  network: (node) => ({ name: `soak-${node}`, range: `10.238.${node}.0/27` }),
  agentArgs: () => [],
  agentEnv: () => ({}),
  runStep: async (step) => {
    throw new Error(`the SQLite store has no step ${step.action}`);
  },
  heldOutsideFile: async () => new Set(),
  auditCluster: async () => [],
  close: async () => {},
};

export const sqliteBackend: StoreBackend = {
  name: 'sqlite',
  open: async () => sqliteStore,
};

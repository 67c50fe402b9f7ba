/** Warren's public API, layer by layer. */
export { type Clock, ManualClock, systemClock } from './core/clock.ts';
export { WarrenError, type WarrenErrorCode, isWarrenError } from './core/errors.ts';
export { KeyedMutex } from './core/keyed-mutex.ts';
export { type Cidr, type Family, type IPAddress, formatIP, parseCidr, parseIP } from './ipam/address.ts';
export type { Allocation, Owner } from './ipam/allocation.ts';
export { type IgnoredKey, type IpamConfig, type RangeSpec, capacityOf, parseIpamConfig } from './ipam/config.ts';
export { type PoolKey, parsePoolKey, poolsOverlap } from './ipam/pool-key.ts';
export { PoolState } from './ipam/pool-state.ts';
export { RunSet } from './ipam/run-set.ts';
export { Allocator, type AllocateRequest, type Assignment, type ReleaseLimits } from './store/allocator.ts';
export { SqliteStore } from './store/sqlite-store.ts';
export type { CommitResult, PoolOp, PoolRead, Store } from './store/store.ts';
export { CniHandler, type CniOutcome, type CniRequest } from './cni/handler.ts';
export { type NetConf, parseNetConf } from './cni/netconf.ts';
export { SUPPORTED_VERSIONS, renderResult } from './cni/spec.ts';
export { Agent } from './agent/agent.ts';
export { type AgentOptions, resolveAgentOptions } from './agent/options.ts';

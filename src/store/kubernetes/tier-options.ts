/**
 * What the Kubernetes cluster tier (tier.ts) is opened with, and the options refused before any
 * request: a namespace that is not a valid name, a lease time that is not a whole number of seconds
 * above 0 (INVALID_CONFIG naming the value).
 */
import type { Clock } from '../../core/clock.ts';
import { WarrenError } from '../../core/errors.ts';
import type { ApiRequestCounter } from './api-requests.ts';
import type { KubeAccess } from './kube-access.ts';

export interface KubeTierOptions {
  readonly kubeConfig: KubeAccess;
  /** Where the Leases live: the agent's namespace. */
  readonly namespace: string;
  readonly leaseSeconds: number;
  /** How long another node's agent has to answer a ping before it counts as gone (lease-ping.ts; default 30). */
  readonly pingSeconds?: number | undefined;
  readonly clock: Clock;
  readonly notice?: (message: string) => void;
  /** Told what the agent logs at debug: an outcome a store check begun before an accept dropped. */
  readonly debug?: (message: string) => void;
  /** Deadline of each request, milliseconds (api-client.ts). */
  readonly requestTimeoutMs?: number;
  /** Largest answer read, bytes (api-client.ts; tests). */
  readonly maxAnswerBytes?: number;
  /** Told of every request sent, and the User-Agent they carry (api-client.ts). */
  readonly requests?: ApiRequestCounter | undefined;
  readonly userAgent?: string | undefined;
  /**
   * The store's identity this agent recorded when it last ran (its state directory): a store found
   * without it, or with another, lost its data while the agent was away, and is not written.
   */
  readonly identity?: string | undefined;
}

/** Throws INVALID_CONFIG for an option the tier cannot be opened with. */
export function checkTierOptions(o: KubeTierOptions): void {
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(o.namespace))
    throw new WarrenError(
      'INVALID_CONFIG',
      `the Kubernetes namespace ${JSON.stringify(o.namespace)} is not a valid name`,
    );
  if (!(Number.isInteger(o.leaseSeconds) && o.leaseSeconds > 0))
    throw new WarrenError(
      'INVALID_CONFIG',
      `the lease time must be a whole number of seconds > 0, not ${o.leaseSeconds}`,
    );
}

/**
 * What the release pipeline logs: each release committed and each failed attempt, in the words
 * and fields of the source the intent came from (a journal file, a gone namespace, a container
 * event, a gone pod), so an operator reading one source's lines finds all of them. Container
 * intents log under the source metrics name (sourceOf): containerd's own, or `plugin` with the
 * adapter's name when a registered adapter said so.
 */
import type { Logger } from 'pino';
import type { Allocation } from '../../ipam/allocation.ts';
import { type ReleaseIntent, sourceOf } from './intent.ts';

type ContainerIntent = Extract<ReleaseIntent, { containerID: string }>;

export class ReleaseLog {
  readonly #logger: Logger;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Where a container intent came from, as metrics name it, and the adapter if one said it. */
  #containerFields(intent: ContainerIntent): { source: string; adapter?: string } {
    return intent.via === undefined
      ? { source: sourceOf(intent) }
      : { source: sourceOf(intent), adapter: intent.via.adapter };
  }

  /** An intent's action was applied; `released` may be empty (nothing was held any more). */
  released(intent: ReleaseIntent, released: readonly Allocation[], why: string): void {
    const addresses = released.map((a) => a.address);
    switch (intent.kind) {
      case 'journal-del':
        this.#logger.info({ file: intent.file, released: addresses }, 'missed delete released');
        return;
      case 'netns-gone':
        if (released.length > 0)
          this.#logger.info(
            { containerID: intent.owner.containerID, ifname: intent.owner.ifname, addresses, netns: intent.netns },
            'released: network namespace is gone',
          );
        return;
      case 'container-deleted':
      case 'task-exited':
      case 'namespace-recheck':
      case 'absent-at-resync':
        if (released.length > 0)
          this.#logger.info(
            { ...this.#containerFields(intent), containerID: intent.containerID, addresses, why },
            'released',
          );
        return;
      case 'pod-gone':
        if (released.length > 0)
          this.#logger.info(
            {
              source: 'kubernetes',
              pod: `${intent.pod.namespace}/${intent.pod.name}`,
              podUID: intent.pod.uid,
              because: intent.because,
              addresses,
              why,
            },
            'released',
          );
        return;
      default: {
        const never: never = intent;
        throw new Error(`unhandled intent ${JSON.stringify(never)}`);
      }
    }
  }

  /** A journaled DEL the rule dropped: its file goes, and the operator sees why. */
  dropped(intent: ReleaseIntent, reason: string): void {
    if (intent.kind === 'journal-del')
      this.#logger.info({ file: intent.file, released: [], reason }, 'missed delete released');
  }

  /** A container whose task exited keeps its addresses until its namespace is gone. */
  exited(intent: ContainerIntent, waitingFor: string): void {
    this.#logger.info(
      { ...this.#containerFields(intent), containerID: intent.containerID, waitingFor },
      'task exited; addresses kept until its network namespace is gone or the container is deleted',
    );
  }

  /** An attempt failed and its key backs off for `retryInMs`. */
  failed(intent: ReleaseIntent, failures: number, err: string, retryInMs: number): void {
    if (intent.kind === 'journal-del')
      this.#logger.warn({ file: intent.file, failures, err, retryInMs }, 'missed delete release failed; will retry');
    else if (intent.kind === 'netns-gone')
      this.#logger.warn(
        { containerID: intent.owner.containerID, ifname: intent.owner.ifname, err, retryInMs },
        'release of a gone namespace failed; will retry',
      );
    else if (intent.kind === 'pod-gone')
      this.#logger.warn(
        { source: 'kubernetes', podUID: intent.pod.uid, err, retryInMs },
        'release of a gone pod failed; will retry',
      );
    else
      this.#logger.warn(
        { ...this.#containerFields(intent), containerID: intent.containerID, event: intent.kind, err, retryInMs },
        'container event failed; will retry in order',
      );
  }
}

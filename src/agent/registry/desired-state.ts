/**
 * The registry's desired state: the sockets in the plugins directory that should be registered,
 * each with its inode (a socket replaced in place has a new one) and when it was seen, on the
 * injected clock (kubelet's cache reads time.Now() itself, so its tests wait in real time).
 *
 * Which socket file a path holds is its `generation`, not its inode: the watcher reports a path
 * again only when another file is there, and ext4 gives a socket made again the inode number just
 * freed, so a report for a known path is a replacement even when the inode is the same.
 *
 * Guarantees: only the socket watcher's reports change it; every report of a socket gets a
 * generation no earlier report had; removing a path that is not here is a no-op and says so
 * (kubernetes #96827: kubelet's delete path unregisters whatever path was removed, socket or not).
 */
import type { Clock } from '../../core/clock.ts';

export interface DesiredSocket {
  /** Which report of a socket this is, unique in this state: a replaced socket has a new one. */
  readonly generation: number;
  readonly ino: number;
  /** When this inode was first seen at the path, ms since the epoch. */
  readonly seenAt: number;
}

/** What `add` did: a new path, or another socket at a known path. */
export type DesiredChange = 'added' | 'replaced';

export class DesiredState {
  readonly #clock: Clock;
  readonly #sockets = new Map<string, DesiredSocket>();
  /** The last generation given. */
  #generation = 0;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** A socket reported at `path`: a new one, or one replacing what was there. */
  add(path: string, ino: number): DesiredChange {
    const known = this.#sockets.has(path);
    this.#sockets.set(path, { generation: ++this.#generation, ino, seenAt: this.#clock.now() });
    return known ? 'replaced' : 'added';
  }

  /** False when the path was not a desired socket: nothing changed. */
  remove(path: string): boolean {
    return this.#sockets.delete(path);
  }

  get(path: string): DesiredSocket | undefined {
    return this.#sockets.get(path);
  }

  has(path: string): boolean {
    return this.#sockets.has(path);
  }

  paths(): string[] {
    return [...this.#sockets.keys()];
  }

  get size(): number {
    return this.#sockets.size;
  }
}

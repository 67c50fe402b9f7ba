/**
 * The fake API server in a process of its own, for the scale harness (`--api child`): started by
 * api-server.ts with `fork` (an IPC channel), it serves the fake (fake-control.ts) and answers the
 * harness's control messages on that channel — each `{ id, op, args }` answered `{ id, result }` or
 * `{ id, error }` — so the harness's nodes hold only their own ends of their connections (one
 * process holding both ends of every watch ran out of open files at ~690 nodes).
 *
 * Guarantees: it says `{ ready: true, adminKubeconfig }` once the fake listens (with nothing else before it); `stop`
 * stops the fake, answers, and the process exits; the process exits too when the harness goes
 * (the channel closes), so no fake outlives its harness.
 *
 * Run by the harness only: `node bench/scale/fake-api-process.ts <clock ms> [http2]` (`http2`: the
 * fake offers HTTP/2 by ALPN beside HTTP/1.1).
 */
import { FakeControl } from './fake-control.ts';

export interface ControlRequest {
  readonly id: number;
  readonly op:
    | 'adminKubeconfig'
    | 'kubeconfigFor'
    | 'setNow'
    | 'progress'
    | 'clearCounts'
    | 'counts'
    | 'watchCounts'
    | 'connections'
    | 'stop';
  readonly args: readonly unknown[];
}

export interface ControlAnswer {
  readonly id: number;
  readonly result?: unknown;
  readonly error?: string;
}

const send = (message: unknown): void => {
  process.send?.(message);
};

function answer(control: FakeControl, request: ControlRequest): unknown {
  const [first] = request.args;
  switch (request.op) {
    case 'adminKubeconfig':
      return control.adminKubeconfig();
    case 'kubeconfigFor':
      return control.kubeconfigFor(String(first));
    case 'setNow':
      return control.setNow(Number(first));
    case 'progress':
      return control.progress();
    case 'clearCounts':
      return control.clearCounts();
    case 'counts':
      return control.counts();
    case 'watchCounts':
      return control.watchCounts(first as string[]);
    case 'connections':
      return control.connections();
    case 'stop':
      return undefined; // handled by the caller
    default: {
      const never: never = request.op;
      throw new Error(`unknown control op ${String(never)}`);
    }
  }
}

const control = await FakeControl.start(Number(process.argv[2] ?? Date.now()), process.argv[3] === 'http2');
process.on('disconnect', () => {
  void control.stop().finally(() => process.exit(0));
});
process.on('message', (message: ControlRequest) => {
  if (message.op === 'stop') {
    void control.stop().then(
      () => {
        send({ id: message.id });
        process.disconnect();
      },
      (error: unknown) => send({ id: message.id, error: String(error) }),
    );
    return;
  }
  try {
    send({ id: message.id, result: answer(control, message) } satisfies ControlAnswer);
  } catch (error) {
    send({ id: message.id, error: String(error) } satisfies ControlAnswer);
  }
});
send({ ready: true, adminKubeconfig: control.adminKubeconfig() });

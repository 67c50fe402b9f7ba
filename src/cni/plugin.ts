/**
 * The CNI plugin: reads the environment and stdin, asks the agent over its unix socket, and prints
 * the answer. The agent validates every call; the plugin validates the config itself only when
 * the agent cannot answer, so a bad config is still reported as one (7) with the agent down. It is
 * on the hot path of every pod start, so it loads only what that needs.
 *
 * When the agent cannot be reached: ADD fails with code 11 (try again later) and allocates
 * nothing; STATUS answers 50; CHECK and GC fail with code 11; DEL records its intent in the
 * missed-delete journal and succeeds (the agent releases it when it is back), and fails with
 * code 11 only if even that record cannot be written.
 */
import { readSync } from 'node:fs';
import { DEFAULT_JOURNAL_DIR, DEFAULT_SOCKET } from '../core/defaults.ts';
import { WarrenError, isWarrenError, messageOf } from '../core/errors.ts';
import { requestJson } from '../core/unix-http.ts';
import { type CniEnv, parseCniArgs, parseCniEnv } from './args.ts';
import { toCniError } from './errors.ts';
import type { CniOutcome, CniRequest } from './handler.ts';
import { type NetConf, declaredVersion, parseNetConf } from './netconf.ts';
import { SPEC_VERSION, versionResult } from './spec.ts';

export interface PluginIO {
  readonly env: NodeJS.ProcessEnv;
  readonly stdin: () => Promise<string>;
  readonly write: (text: string) => void;
}

/** A CNI runtime sets CNI_* variables; without them the executable is the command line. */
export function isCniCall(env: NodeJS.ProcessEnv): boolean {
  return env.CNI_COMMAND !== undefined || env.CNI_CONTAINERID !== undefined || env.CNI_NETNS !== undefined;
}

/** Runs one plugin invocation; returns the exit code. */
export async function runPlugin(io: PluginIO): Promise<number> {
  let version = SPEC_VERSION;
  const fail = (error: unknown): number => {
    io.write(JSON.stringify(toCniError(error, version)));
    return 1;
  };
  let env: CniEnv;
  try {
    env = parseCniEnv(io.env);
  } catch (error) {
    return fail(error);
  }
  let text: string;
  try {
    text = await io.stdin();
  } catch (error) {
    if (isWarrenError(error)) return fail(error);
    return fail(new WarrenError('IO_FAILURE', 'could not read the network config from stdin', { cause: error }));
  }
  if (env.command === 'VERSION') {
    io.write(JSON.stringify(versionResult()));
    return 0;
  }
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (error) {
    return fail(new WarrenError('DECODE_FAILURE', `network config on stdin is not valid JSON: ${(error as Error).message}`));
  }
  version = declaredVersion(config) ?? SPEC_VERSION;
  // The agent validates everything again (it trusts no caller), so while it answers the plugin
  // does not spend a pod start on a second validation: it validates only when it must answer
  // alone, to tell a bad config (7) from an absent agent (11).
  const socket = socketOf(config) ?? io.env.WARREN_SOCKET ?? DEFAULT_SOCKET;
  const validate = (): NetConf => {
    const conf = parseNetConf(config, env.command);
    if (env.command === 'ADD') parseCniArgs(env.args);
    return conf;
  };
  /** DEL's fallback: record the intent durably so the agent releases it later, then succeed. */
  const journalDelete = async (why: string, conf: NetConf): Promise<number> => {
    const dir = conf.ipam.journalDir ?? io.env.WARREN_JOURNAL_DIR ?? DEFAULT_JOURNAL_DIR;
    try {
      const { recordMissedDelete } = await import('./journal-writer.ts');
      recordMissedDelete(dir, {
        format: 1,
        network: conf.name,
        containerID: env.containerID as string,
        ifname: env.ifname as string,
        ...(env.netns === undefined ? {} : { netns: env.netns }),
        recordedAt: Date.now(),
        reason: why,
      });
      return 0;
    } catch (error) {
      return fail(new WarrenError('TRY_AGAIN', `${why}; and the missed-delete journal ${dir} could not record the DEL: ${messageOf(error)}`));
    }
  };
  const request: CniRequest = {
    command: env.command,
    config,
    args: env.args,
    ...(env.containerID === undefined ? {} : { containerID: env.containerID }),
    ...(env.netns === undefined ? {} : { netns: env.netns }),
    ...(env.ifname === undefined ? {} : { ifname: env.ifname }),
  };
  try {
    const response = await requestJson({ socket, method: 'POST', path: '/v1/cni', body: request });
    const outcome = response.body as CniOutcome | undefined;
    if (response.status !== 200 || outcome === undefined || typeof outcome !== 'object') {
      throw new WarrenError('IO_FAILURE', `Warren agent at ${socket} answered HTTP ${response.status} without a CNI outcome`);
    }
    switch (outcome.kind) {
      case 'result':
        io.write(JSON.stringify(outcome.output));
        return 0;
      case 'silent':
        return 0;
      case 'error':
        // The agent took the call but could not commit it now: keep the DEL's promise via the journal.
        if (env.command === 'DEL' && (outcome.output.code === 11 || outcome.output.code === 5)) return journalDelete(outcome.output.msg, validate());
        io.write(JSON.stringify(outcome.output));
        return 1;
      default:
        throw new WarrenError('IO_FAILURE', `Warren agent at ${socket} answered an unknown outcome`);
    }
  } catch (error) {
    if (!isWarrenError(error, 'AGENT_UNREACHABLE') && !isWarrenError(error, 'IO_FAILURE')) return fail(error);
    let conf: NetConf;
    try {
      conf = validate();
    } catch (invalid) {
      return fail(invalid);
    }
    if (env.command === 'STATUS' && isWarrenError(error, 'AGENT_UNREACHABLE')) {
      return fail(new WarrenError('NOT_READY', error.message, { cause: error.cause }));
    }
    if (env.command === 'DEL') return journalDelete(error.message, conf);
    return fail(error);
  }
}

/** Network configs are small; anything past this is refused rather than buffered. */
export const MAX_CONFIG_BYTES = 4 * 1024 * 1024;

/** Reads all of fd 0 with blocking reads; EAGAIN (a non-blocking stdin) waits briefly and retries. */
export function readStdinSync(limit = MAX_CONFIG_BYTES): string {
  const chunks: Buffer[] = [];
  let size = 0;
  const buffer = Buffer.alloc(64 * 1024);
  for (;;) {
    let n: number;
    try {
      n = readSync(0, buffer, 0, buffer.length, null);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN') {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
        continue;
      }
      if (code === 'EOF') break;
      throw error;
    }
    if (n === 0) break;
    size += n;
    if (size > limit) throw new WarrenError('DECODE_FAILURE', `network config on stdin is larger than ${limit} bytes`);
    chunks.push(Buffer.from(buffer.subarray(0, n)));
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** ipam.socket when the config names one; the agent checks the rest of the config. */
function socketOf(config: unknown): string | undefined {
  const ipam = typeof config === 'object' && config !== null ? (config as { ipam?: unknown }).ipam : undefined;
  const socket = typeof ipam === 'object' && ipam !== null ? (ipam as { socket?: unknown }).socket : undefined;
  return typeof socket === 'string' && socket.startsWith('/') ? socket : undefined;
}


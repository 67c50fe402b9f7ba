/**
 * The CNI plugin: reads the environment and stdin, asks the agent over its unix socket, and prints
 * the answer. The agent validates every call; the plugin validates the config itself only when
 * the agent cannot answer, so a bad config is still reported as one (7) with the agent down. It is
 * on the hot path of every pod start, so it loads only what that needs: of the API, the CNI call,
 * the rule that prints an outcome and the error tables alone (api/cni-call.ts, api/cni-stdout.ts,
 * api/errors.ts); the journal writer only when a DEL falls back to it.
 *
 * Installed, it runs behind the native forwarder (src/plugin/forwarder), which execs it with the
 * same environment and stdin whenever the agent does not answer the call as stdout itself. The
 * agent answers by the rule this plugin prints by (api/cni-stdout.ts `stdoutOf`), so a call prints
 * the same bytes whichever of the two answers it.
 *
 * It waits AGENT_ANSWER_TIMEOUT_MS for the agent, and not at all when the forwarder says it waited
 * that long in vain (FORWARDER_TIMED_OUT_ENV): a DEL against a wedged agent is journaled and
 * answered within DEL_BUDGET_MS (api/limits.ts).
 *
 * When the agent cannot be reached: ADD fails with code 11 (try again later) and allocates
 * nothing; STATUS answers 50; CHECK and GC fail with code 11; DEL records its intent in the
 * missed-delete journal and succeeds (the agent releases it when it is back), and fails with
 * code 11 only if even that record cannot be written. A DEL whose request cannot be built or
 * sent, or that the agent took but could not commit, is journaled the same way.
 *
 * A config nested deeper than MAX_CONFIG_DEPTH is refused before anything walks it (7); a DEL
 * with one is journaled when its top-level `name` is a network name. So is a DEL whose config does
 * not validate and that the agent did not take: a DEL needs only its network, container and
 * interface (cni/del-target.ts); the agent releases such a DEL by them when it answers.
 */
import { readSync } from 'node:fs';
import { defined } from '../core/defined.ts';
import { WarrenError, isWarrenError, messageOf } from '../core/errors.ts';
import { isPlainObject } from '../core/validate.ts';
import {
  AGENT_ANSWER_TIMEOUT_MS,
  FORWARDER_TIMED_OUT_ENV,
  MAX_CONFIG_BYTES,
  MAX_CONFIG_DEPTH,
  nestsDeeperThan,
} from '../api/limits.ts';
import { type CniEnv, parseCniArgs, parseCniEnv } from '../cni/args.ts';
import { delTargetOf } from '../cni/del-target.ts';
import { declaredVersion, parseNetConf } from '../cni/netconf.ts';
import { DEFAULT_JOURNAL_DIR } from '../cni/journal-dir.ts';
import { SPEC_VERSION, versionResult } from '../cni/spec.ts';
import { callCni, cniRequestText } from '../api/cni-call.ts';
import { type PrintAnswer, failureStdout, stdoutOf } from '../api/cni-stdout.ts';
import { DEFAULT_SOCKET } from '../api/socket.ts';
import type { CniOutcome } from '../api/protocol.ts';

export interface PluginIO {
  readonly env: NodeJS.ProcessEnv;
  readonly stdin: () => Promise<string>;
  readonly write: (text: string) => void;
}

/** Where a DEL the agent did not take is recorded: its network, and the journal to write to. */
interface JournalTarget {
  readonly network: string;
  readonly journalDir: string | undefined;
}

/** Said once with every "agent not reachable" answer: what the operator reading it should do. */
const UNREACHABLE_HINT = 'is `warren agent` running? the runtime will retry';

/** A CNI runtime sets CNI_* variables; without them the executable is the command line. */
export function isCniCall(env: NodeJS.ProcessEnv): boolean {
  return env.CNI_COMMAND !== undefined || env.CNI_CONTAINERID !== undefined || env.CNI_NETNS !== undefined;
}

/** Runs one plugin invocation; returns the exit code. */
export async function runPlugin(io: PluginIO): Promise<number> {
  let version = SPEC_VERSION;
  const print = (answer: PrintAnswer): number => {
    if (answer.stdout !== '') io.write(answer.stdout);
    return answer.exitCode;
  };
  const fail = (error: unknown): number => print(failureStdout(error, version));
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
    // V8 parses iteratively: any nesting that fits in memory parses.
    config = JSON.parse(text);
  } catch (error) {
    return fail(
      new WarrenError('DECODE_FAILURE', `network config on stdin is not valid JSON: ${(error as Error).message}`),
    );
  }
  version = declaredVersion(config) ?? SPEC_VERSION;

  /** DEL's fallback: record the intent durably so the agent releases it later, then succeed. */
  const journalDelete = async (why: string, target: JournalTarget): Promise<number> => {
    const dir = target.journalDir ?? io.env.WARREN_JOURNAL_DIR ?? DEFAULT_JOURNAL_DIR;
    try {
      const { recordMissedDelete, recordingMoment } = await import('./journal-writer.ts');
      const at = recordingMoment();
      recordMissedDelete(dir, {
        format: 1,
        network: target.network,
        containerID: env.containerID as string,
        ifname: env.ifname as string,
        ...defined({ netns: env.netns }),
        recordedAt: at.wall,
        ...defined({ stamp: at.stamp }),
        reason: why,
      });
      return 0;
    } catch (error) {
      return fail(
        new WarrenError(
          'TRY_AGAIN',
          `${why}; and the missed-delete journal ${dir} could not record the DEL: ${messageOf(error)}`,
        ),
      );
    }
  };

  if (nestsDeeperThan(text, MAX_CONFIG_DEPTH)) {
    // Refused here, before anything walks it: code that recurses through a value (encoding it,
    // validating it) overflows the stack on it. A DEL still keeps its promise when the config's
    // top level says which network it is.
    const tooDeep = new WarrenError(
      'INVALID_CONFIG',
      `network config nests arrays and objects more than ${MAX_CONFIG_DEPTH} levels deep`,
    );
    if (env.command !== 'DEL') return fail(tooDeep);
    let target: JournalTarget;
    try {
      target = delTargetOf(config, tooDeep.message);
    } catch (error) {
      return fail(error);
    }
    return journalDelete(`${tooDeep.message}; not sent to the agent`, target);
  }

  // The agent validates everything again (it trusts no caller), so while it answers the plugin
  // does not spend a pod start on a second validation: it validates only when it must answer
  // alone, to tell a bad config (7) from an absent agent (11).
  // An empty WARREN_SOCKET counts as unset, as it does for the agent and the forwarder.
  const socket = socketOf(config) ?? (io.env.WARREN_SOCKET || DEFAULT_SOCKET);
  const validate = (): JournalTarget => {
    const conf = parseNetConf(config, env.command);
    if (env.command === 'ADD') parseCniArgs(env.args);
    return { network: conf.name, journalDir: conf.ipam.journalDir };
  };
  /**
   * A DEL the agent did not commit, journaled. A config that does not validate is journaled by what
   * a DEL needs of it (cni/del-target.ts), and refused (7) only when not even that can be read.
   */
  const journalChecked = (why: string): number | Promise<number> => {
    let target: JournalTarget;
    try {
      target = validate();
    } catch (invalid) {
      try {
        target = delTargetOf(config, messageOf(invalid));
      } catch (unreadable) {
        return fail(unreadable);
      }
      return journalDelete(`${why}; its network config is invalid: ${messageOf(invalid)}`, target);
    }
    return journalDelete(why, target);
  };
  let outcome: CniOutcome;
  try {
    // The forwarder waited for this agent already and got no answer: asking again would double a
    // wedged agent's cost, past the runtime's own timeout (DEL_BUDGET_MS).
    const waited = forwarderWaited(io.env);
    if (waited !== undefined)
      throw new WarrenError(
        'AGENT_UNREACHABLE',
        `Warren agent at ${socket} did not answer within ${waited} ms (the forwarder waited; not asked again)`,
      );
    outcome = await callCni({ socket, bodyText: cniRequestText(env, text), timeoutMs: AGENT_ANSWER_TIMEOUT_MS });
  } catch (error) {
    // The agent did not take the call: it could not be reached, answered nonsense, or refused the
    // request itself. A DEL goes to the journal; the other commands answer alone.
    if (env.command === 'DEL') return journalChecked(messageOf(error));
    try {
      validate();
    } catch (invalid) {
      return fail(invalid);
    }
    if (!isWarrenError(error, 'AGENT_UNREACHABLE')) return fail(error);
    const hinted = `${error.message}: ${UNREACHABLE_HINT}`;
    return fail(
      new WarrenError(env.command === 'STATUS' ? 'NOT_READY' : 'AGENT_UNREACHABLE', hinted, { cause: error.cause }),
    );
  }
  // The agent's outcome, printed by the rule the agent also answers the native forwarder with.
  const answer = stdoutOf(env.command, outcome);
  switch (answer.kind) {
    case 'print':
      return print(answer);
    case 'plugin':
      // A DEL the agent took but could not commit now: keep its promise via the journal.
      return journalChecked(answer.why);
    default: {
      const never: never = answer;
      return fail(new WarrenError('IO_FAILURE', `unhandled answer ${JSON.stringify(never)}`));
    }
  }
}

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
    if (size > limit) throw new WarrenError('TOO_LARGE', `network config on stdin is larger than ${limit} bytes`);
    chunks.push(Buffer.from(buffer.subarray(0, n)));
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** How long the native forwarder waited for the agent in vain, when it says so (FORWARDER_TIMED_OUT_ENV). */
function forwarderWaited(env: NodeJS.ProcessEnv): number | undefined {
  const value = env[FORWARDER_TIMED_OUT_ENV];
  return value !== undefined && /^\d{1,9}$/.test(value) ? Number(value) : undefined;
}

/** ipam.socket when the config names one; the agent checks the rest of the config. */
function socketOf(config: unknown): string | undefined {
  const ipam = isPlainObject(config) ? config.ipam : undefined;
  const socket = isPlainObject(ipam) ? ipam.socket : undefined;
  return typeof socket === 'string' && socket.startsWith('/') ? socket : undefined;
}

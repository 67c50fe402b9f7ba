/**
 * What a CNI call prints: the one rule that turns the agent's outcome of a call into the plugin's
 * stdout and exit code, or says that the plugin must handle the call itself. The TypeScript plugin
 * applies it to the outcome it asked for; the agent applies it when the native forwarder asks for
 * the answer as stdout (forwarded-call.ts), so both print the same bytes for the same outcome and
 * the rule lives here only.
 *
 * Guarantees:
 * - `print` holds exactly the bytes the plugin writes to stdout (none for a silent outcome) and
 *   its exit code: 0 for a result or silence, 1 for a CNI error object.
 * - `plugin` is answered for exactly the outcomes the plugin does not simply print: a DEL the
 *   agent took but could not commit (CNI 11, try again, or 5, an I/O failure) is the plugin's to
 *   keep through the missed-delete journal.
 *
 * The forwarder's side of the wire (header names, how an answer is written) is defined in
 * cni-wire.ts with the rest of the wire. A file of its own: the plugin loads it on every pod start.
 */
import type { CniErrorObject } from '../cni/errors.ts';
import { toCniError } from './errors.ts';
import type { CniOutcome } from './protocol.ts';

// The forwarder's side of the wire is defined with the rest of it (cni-wire.ts).
export { ANSWER_HEADER, EXIT_HEADER, FALLBACK_HEADER } from './cni-wire.ts';

// Its answers' types are the wire's (cni-wire.ts), where the forwarder's side reads them.
import type { PrintAnswer, StdoutAnswer } from './cni-wire.ts';

export type { FallbackReason, PluginAnswer, PrintAnswer, StdoutAnswer } from './cni-wire.ts';

/** The plugin's answer to an outcome of `command` from the agent. */
export function stdoutOf(command: string, outcome: CniOutcome): StdoutAnswer {
  switch (outcome.kind) {
    case 'result':
      return { kind: 'print', stdout: JSON.stringify(outcome.output), exitCode: 0 };
    case 'silent':
      return { kind: 'print', stdout: '', exitCode: 0 };
    case 'error':
      // The agent took the DEL but could not commit it now: the plugin keeps its promise through
      // the journal, which only it writes (it is what the runtime called).
      if (command === 'DEL' && isNotCommitted(outcome.output))
        return { kind: 'plugin', reason: 'del-not-committed', why: outcome.output.msg };
      return errorStdout(outcome.output);
    default: {
      const never: never = outcome;
      throw new Error(`unknown CNI outcome ${JSON.stringify(never)}`);
    }
  }
}

/** A failure printed as a CNI error object: what the plugin prints when it answers alone. */
export function failureStdout(error: unknown, cniVersion: string): PrintAnswer {
  return errorStdout(toCniError(error, cniVersion));
}

function errorStdout(output: CniErrorObject): PrintAnswer {
  return { kind: 'print', stdout: JSON.stringify(output), exitCode: 1 };
}

/** CNI 11 (try again later) or 5 (I/O failure): the store could not commit the release now. */
function isNotCommitted(output: CniErrorObject): boolean {
  return output.code === 11 || output.code === 5;
}

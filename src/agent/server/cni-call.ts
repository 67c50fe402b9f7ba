/**
 * A CNI call as it comes over the wire, checked before the agent acts on it: the agent never trusts
 * the plugin, so a CniRequest passes the plugin's own rules again here.
 *
 * - No field but those of a CniRequest (api/cni-wire.ts), as the forwarded call refuses one;
 *   a field of the wrong JSON type is BAD_REQUEST (7).
 * - The fields then pass the same rules as the plugin's environment (cni/args.ts `checkCniVariables`),
 *   so both refuse the same input with the same CNI code (BAD_ENV, naming the variable).
 * - Pure: nothing here touches the allocator or the store.
 */
import { WarrenError } from '../../core/errors.ts';
import { isPlainObject, validator } from '../../core/validate.ts';
import type { Owner } from '../../ipam/allocation.ts';
import { type CniEnv, checkCniVariables } from '../../cni/args.ts';
import type { NetConf } from '../../cni/netconf.ts';
import { CONFIG_FIELD, ENVELOPE } from '../../api/cni-wire.ts';

/** A request whose fields passed the spec's rules; the config is parsed per command. */
export interface CniCall {
  readonly env: CniEnv;
  readonly config: unknown;
}

/** The fields of a CniRequest (api/cni-wire.ts); any other is refused, as the forwarded call refuses one. */
const REQUEST_FIELDS: ReadonlySet<string> = new Set([...ENVELOPE.map((f) => f.field), CONFIG_FIELD]);

const { refuseUnknownFields } = validator((message) => new WarrenError('BAD_REQUEST', message));

/**
 * The request's fields, checked: no unknown one, each a string where present (BAD_REQUEST
 * otherwise), then they pass the same rules as the plugin's environment (BAD_ENV, naming the
 * variable).
 */
export function cniCallOf(request: unknown): CniCall {
  if (!isPlainObject(request)) throw new WarrenError('BAD_REQUEST', 'request must be a JSON object');
  refuseUnknownFields(request, REQUEST_FIELDS, 'request');
  const r = request;
  const env = checkCniVariables({
    command: stringField(r.command, 'command'),
    containerID: optionalString(r.containerID, 'containerID'),
    netns: optionalString(r.netns, 'netns'),
    ifname: optionalString(r.ifname, 'ifname'),
    args: optionalString(r.args, 'args'),
  });
  return { env, config: r.config };
}

function stringField(value: unknown, name: string): string {
  if (typeof value !== 'string') throw new WarrenError('BAD_REQUEST', `request field ${name} must be a string`);
  return value;
}

function optionalString(value: unknown, name: string): string | undefined {
  return value === undefined ? undefined : stringField(value, name);
}

/** ADD, DEL and CHECK passed checkCniVariables, which requires both. */
export function ownerOf(env: CniEnv, conf: Pick<NetConf, 'name'>): Owner {
  return { network: conf.name, containerID: env.containerID as string, ifname: env.ifname as string };
}

/**
 * The CNI environment: CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS, CNI_PATH.
 * Problems are BAD_ENV errors naming the variable. The one home of the spec's name rules: the
 * plugin's environment and the agent's request are checked by the same function.
 */
import { WarrenError } from '../core/errors.ts';
import { type CniCommand, COMMANDS } from './spec.ts';

export interface CniArgs {
  readonly podNamespace?: string;
  readonly podName?: string;
  readonly podUID?: string;
  /** IP= values: one or more addresses, comma separated. */
  readonly ips: readonly string[];
}

export interface CniEnv {
  readonly command: CniCommand;
  readonly containerID?: string;
  readonly netns?: string;
  readonly ifname?: string;
  /** CNI_ARGS as given; parsed by parseCniArgs. */
  readonly args: string;
}

const KNOWN_ARGS = new Set([
  'IgnoreUnknown',
  'K8S_POD_NAMESPACE',
  'K8S_POD_NAME',
  'K8S_POD_UID',
  'K8S_POD_INFRA_CONTAINER_ID',
  'K8S_POD_NETWORK',
  'IP',
]);

/** The spec's container ID: letters, digits, "_", "." and "-", starting with a letter or digit. */
const CONTAINER_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$/;
/** The spec's network name: the same characters, at most 253. */
const NETWORK_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$/;
/** The spec's interface name: 1 to 15 bytes, not "." or "..", no "/", ":" or white space. */
const IFNAME = /^(?!\.{1,2}$)[^\s/:\0]{1,15}$/;

export function isValidContainerID(id: string): boolean {
  return CONTAINER_ID.test(id);
}

export function isValidNetworkName(name: string): boolean {
  return NETWORK_NAME.test(name);
}

export function isValidIfname(name: string): boolean {
  return IFNAME.test(name) && Buffer.byteLength(name) <= 15;
}

function bad(message: string): WarrenError {
  return new WarrenError('BAD_ENV', message);
}

/**
 * The CNI variables as they arrived, unchecked: from the process environment (the plugin) or from
 * the fields of the plugin's request (the agent). Absent and empty mean the same, as in an env.
 */
export interface CniVariables {
  readonly command?: string | undefined;
  readonly containerID?: string | undefined;
  readonly netns?: string | undefined;
  readonly ifname?: string | undefined;
  readonly args?: string | undefined;
}

/** The plugin's side: the CNI variables of its process environment. */
export function parseCniEnv(env: NodeJS.ProcessEnv): CniEnv {
  return checkCniVariables({
    command: env.CNI_COMMAND,
    containerID: env.CNI_CONTAINERID,
    netns: env.CNI_NETNS,
    ifname: env.CNI_IFNAME,
    args: env.CNI_ARGS,
  });
}

/**
 * The spec's rules for the CNI variables, wherever they come from: the plugin checks its
 * environment and the agent checks the request with this one function, so both refuse the same
 * input with the same BAD_ENV message (named by the variable the runtime set).
 */
export function checkCniVariables(vars: CniVariables): CniEnv {
  const command = vars.command;
  if (command === undefined || command === '') throw bad('CNI_COMMAND is not set');
  if (!(COMMANDS as readonly string[]).includes(command))
    throw bad(`CNI_COMMAND "${printable(command)}" is not one of ${COMMANDS.join(', ')}`);
  const cmd = command as CniCommand;
  const out: { -readonly [K in keyof CniEnv]: CniEnv[K] } = { command: cmd, args: vars.args ?? '' };
  const needsContainer = cmd === 'ADD' || cmd === 'DEL' || cmd === 'CHECK';
  if (needsContainer) {
    const id = vars.containerID;
    if (id === undefined || id === '') throw bad('CNI_CONTAINERID is not set');
    if (!isValidContainerID(id))
      throw bad(
        `CNI_CONTAINERID "${printable(id)}" must be 1-255 letters, digits, "_", "." or "-", starting with a ` +
          `letter or digit`,
      );
    out.containerID = id;
    const ifname = vars.ifname;
    if (ifname === undefined || ifname === '') throw bad('CNI_IFNAME is not set');
    if (!isValidIfname(ifname))
      throw bad(
        `CNI_IFNAME "${printable(ifname)}" is not a valid interface name (1-15 bytes, not "." or "..", no ` +
          `spaces, "/" or ":")`,
      );
    out.ifname = ifname;
    const netns = vars.netns;
    // DEL may come after the namespace is gone, with CNI_NETNS empty.
    if ((cmd === 'ADD' || cmd === 'CHECK') && (netns === undefined || netns === '')) throw bad('CNI_NETNS is not set');
    if (netns !== undefined && netns !== '') out.netns = netns;
  }
  return out;
}

/** Parses `K=V;K=V`. Unknown keys are refused unless IgnoreUnknown is true, as the spec asks. */
export function parseCniArgs(text: string): CniArgs {
  const pairs = new Map<string, string>();
  if (text !== '') {
    for (const part of text.split(';')) {
      const eq = part.indexOf('=');
      if (eq <= 0 || part.indexOf('=', eq + 1) >= 0) throw bad(`CNI_ARGS: "${printable(part)}" is not KEY=VALUE`);
      pairs.set(part.slice(0, eq), part.slice(eq + 1));
    }
  }
  const ignoreUnknown = /^(1|true)$/i.test(pairs.get('IgnoreUnknown') ?? '');
  if (!ignoreUnknown) {
    for (const key of pairs.keys()) {
      if (!KNOWN_ARGS.has(key))
        throw bad(`CNI_ARGS: unknown argument "${printable(key)}" (set IgnoreUnknown=1 to allow it)`);
    }
  }
  const out: { -readonly [K in keyof CniArgs]: CniArgs[K] } = { ips: [] };
  const ns = pairs.get('K8S_POD_NAMESPACE');
  const name = pairs.get('K8S_POD_NAME');
  const uid = pairs.get('K8S_POD_UID');
  if (ns) out.podNamespace = ns;
  if (name) out.podName = name;
  if (uid) out.podUID = uid;
  const ip = pairs.get('IP');
  if (ip) out.ips = ip.split(',').map((s) => s.trim());
  return out;
}

/** Shows control characters visibly so error messages cannot be used to forge log lines. */
export function printable(text: string): string {
  const cut = text.length > 80 ? `${text.slice(0, 80)}...` : text;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters to escape is the point
  return cut.replace(/[\x00-\x1f\x7f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}

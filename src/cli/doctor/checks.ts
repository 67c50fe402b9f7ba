/**
 * `warren doctor`'s judgement: everything observed on the node in, findings out. Pure: the
 * observation is gathered elsewhere (doctor-command.ts), so every check is a function of values
 * and is tested as a table.
 *
 * Order of the findings, each group next to the ones it explains: the agent, then what the
 * runtime finds (its CNI dirs, the plugin, the configs that name Warren), then what the agent
 * does with what it is given (journal, namespaces, containerd, store, clock, metrics). Without an
 * agent to ask, only the node's files are judged, on their own.
 */
import { agentFindings } from './agent-checks.ts';
import { type Finding, error, ok, warning } from './finding.ts';
import { configFindings, runtimeDirFindings } from './node-checks.ts';
import type { AgentReach, NodeObservation } from './observation.ts';

function reachFinding(reach: AgentReach, doctorVersion: string): Finding[] {
  switch (reach.kind) {
    case 'reached': {
      const f = reach.facts;
      const found = [
        ok(
          'socket-reachable',
          `the agent answers on ${reach.socket}`,
          `node ${f.node}, version ${f.version}, pid ${f.pid}, state dir ${f.stateDir}`,
        ),
      ];
      if (f.version !== doctorVersion) {
        found.push(
          warning(
            'agent-version-differs',
            `the agent runs version ${f.version}, this command is ${doctorVersion}`,
            "the doctor judges by its own version's rules; a plugin installed from one version and an agent " +
              'of another may disagree too',
            'run one version everywhere: upgrade the older one, then `warren install --cni-bin-dir DIR` from it',
          ),
        );
      }
      return found;
    }
    case 'unreachable':
      return [
        error(
          'socket-unreachable',
          `no agent answers on ${reach.socket}`,
          `${reach.reason}; a plugin sent to this socket finds no agent: ADDs fail and DELs are only ` +
            `journaled until one answers; the checks that need the agent were skipped`,
          `start the agent (\`warren agent\`, or its DaemonSet), or pass --socket PATH if it listens elsewhere`,
        ),
      ];
    case 'refused':
      return [
        error(
          'agent-refused',
          `the agent on ${reach.socket} did not report its setup`,
          `it answered ${reach.code}: ${reach.reason}; the checks that need the agent were skipped`,
          // By the code (every agent answers a route it does not know NOT_FOUND) or the status (an
          // answer this doctor cannot read), never by the message.
          reach.code === 'NOT_FOUND' || reach.httpStatus === 404
            ? `upgrade the agent to version ${doctorVersion} or later, which serves GET /v1/doctor`
            : "see `warren status` and the agent's log for why, then run `warren doctor` again",
        ),
      ];
    default:
      return ((never: never) => never)(reach);
  }
}

/** Every finding about the node, in the order of the module header. */
export function diagnose(node: NodeObservation): Finding[] {
  const facts = node.agent.kind === 'reached' ? node.agent.facts : undefined;
  return [
    ...reachFinding(node.agent, node.doctorVersion),
    ...runtimeDirFindings(node, facts),
    ...configFindings(node.confDir.scan, facts, node.canonical),
    ...(facts === undefined ? [] : agentFindings(facts, node.journalDir, node.containerdConfig, node.pluginsDir)),
  ];
}

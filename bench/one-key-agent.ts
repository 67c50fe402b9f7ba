/**
 * `warren agent` with every range of a cluster store in one key (no blocks), the layout whereabouts
 * uses, for bench/cluster.ts to set beside Warren's blocks. Takes the agent's flags. The agent
 * ships no flag for this: only this entry, which is not installed, builds it (AgentDeps.blocks).
 *
 * Usage: node bench/one-key-agent.ts [warren agent flags]
 */
import { runAgent } from '../src/cli/agent-command.ts';

process.exitCode = await runAgent(
  process.argv.slice(2),
  { out: (text) => process.stdout.write(text), err: (text) => process.stderr.write(text), env: process.env },
  { blocks: false },
);

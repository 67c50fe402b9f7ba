/**
 * Where a command writes, and the environment it was started with: what `runCli` is given and
 * hands to every command. A file of its own so that a command importing the type imports no
 * dispatch (main.ts imports every command: the type living there made each command a circle).
 */
export interface CliIO {
  readonly out: (text: string) => void;
  /** Resolves once what `out` was given is on its way (a long listing waits on it: bounded memory). */
  readonly drain?: () => Promise<void>;
  readonly err: (text: string) => void;
  readonly env: NodeJS.ProcessEnv;
}

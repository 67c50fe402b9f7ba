/**
 * Another process holding a Warren database: what an operator's `sqlite3` shell, a backup tool or
 * a second agent does to the file. The holder opens the database, takes the write lock with
 * BEGIN IMMEDIATE, says so, and keeps it until released (or until the test process exits).
 */
import { spawn } from 'node:child_process';
import { CHILD_PATH, StopWaiting, track, untilReady, waitFor } from './processes.ts';

export interface DatabaseHolder {
  readonly pid: number;
  /** Ends the transaction and waits for the holder to exit. */
  release(): Promise<void>;
}

const HOLDER = `
const { DatabaseSync } = require('node:sqlite');
const db = new DatabaseSync(process.argv[1]);
db.exec('PRAGMA busy_timeout = 10000; BEGIN IMMEDIATE');
process.stdout.write('held\\n');
process.stdin.resume();
process.stdin.on('end', () => { db.exec('ROLLBACK'); db.close(); process.exit(0); });
`;

export async function holdDatabase(path: string): Promise<DatabaseHolder> {
  const child = track(
    spawn(process.execPath, ['-e', HOLDER, path], { env: { PATH: CHILD_PATH }, stdio: ['pipe', 'pipe', 'inherit'] }),
  );
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await untilReady(child, () =>
    waitFor(`process ${child.pid} to hold ${path}`, () => {
      if (child.exitCode !== null) throw new StopWaiting(`holder exited with ${child.exitCode}`);
      return out.includes('held') ? true : undefined;
    }),
  );
  return {
    pid: child.pid as number,
    async release() {
      child.stdin?.end();
      await exited;
    },
  };
}

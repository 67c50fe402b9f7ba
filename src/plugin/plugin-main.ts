/**
 * The installed executable: `npm run build` bundles this file into dist/warren, one small
 * CommonJS file with a shebang, which is what goes into the CNI bin directory. A pod start loads
 * that one file, no TypeScript, no ES module loader (Node's CommonJS loader is already in its
 * startup snapshot), and reads stdin and writes stdout through their file descriptors
 * (process.stdin/stdout would load Node's whole stream stack for one read and one write).
 *
 * Called without CNI_* variables it is the command line, which it loads from the sources.
 */
import { realpathSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { isCniCall, readStdinSync, runPlugin } from './plugin.ts';

if (isCniCall(process.env)) {
  void runPlugin({
    env: process.env,
    stdin: async () => readStdinSync(),
    write: (text) => {
      const bytes = Buffer.from(text);
      let offset = 0;
      while (offset < bytes.length) offset += writeSync(1, bytes, offset);
    },
  }).then((code) => {
    // Output is already written synchronously; exiting now skips the teardown of the spent
    // socket and timers, which is time on every pod start.
    process.exit(code);
  });
} else {
  // dist/warren -> bin/warren, which runs the command line from the sources.
  const launcher = join(dirname(realpathSync(process.argv[1] as string)), '..', 'bin', 'warren');
  process.getBuiltinModule('node:module').createRequire(launcher)(launcher);
}

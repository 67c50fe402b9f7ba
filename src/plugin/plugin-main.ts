/**
 * The installed executable: `npm run build` bundles this file into dist/warren, one small
 * CommonJS file with a shebang, which is what goes into the CNI bin directory. A pod start loads
 * that one file, no TypeScript, no ES module loader (Node's CommonJS loader is already in its
 * startup snapshot), and reads stdin and writes stdout through their file descriptors
 * (process.stdin/stdout would load Node's whole stream stack for one read and one write).
 *
 * Called without CNI_* variables it is the command line, which it loads from the sources beside
 * it; installed in a CNI bin dir, where there are none, it says what it is.
 *
 * On a node, the runtime runs the native forwarder (src/plugin/forwarder), which hands a call to
 * this plugin only when the agent cannot answer it alone (see src/api/cni-stdout.ts).
 */
import { existsSync, realpathSync, writeSync } from 'node:fs';
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
  // dist/warren -> bin/warren, which runs the command line from the sources. Installed in a CNI
  // bin dir (warren.d/warren.cjs) there are no sources beside it: say so instead of a stack trace.
  const launcher = join(dirname(realpathSync(process.argv[1] as string)), '..', 'bin', 'warren');
  if (existsSync(launcher)) {
    process.getBuiltinModule('node:module').createRequire(launcher)(launcher);
  } else {
    writeSync(
      2,
      'warren: this is the CNI plugin, run by a container runtime (it sets CNI_COMMAND); the warren command ' +
        'line comes with the agent (`warren status`, `warren install`)\n',
    );
    process.exitCode = 2;
  }
}

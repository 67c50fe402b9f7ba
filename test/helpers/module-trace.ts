/**
 * Loaded into a child process with `--import` (NODE_OPTIONS): appends the URL of every module the
 * process resolves — imported or required, its own and npm packages — to the file named by
 * WARREN_TEST_MODULE_TRACE, one a line, as it resolves it. For tests of what a process loads.
 */
import { appendFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const out = process.env.WARREN_TEST_MODULE_TRACE;
if (out !== undefined && out !== '') {
  registerHooks({
    resolve(specifier, context, next) {
      const resolved = next(specifier, context);
      appendFileSync(out, `${resolved.url}\n`);
      return resolved;
    },
  });
}

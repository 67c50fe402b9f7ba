/*
 * Linked into every build scripts/build.ts buildSanitized makes (the forwarder under the
 * sanitizers, the test drivers): LeakSanitizer's defaults, read by its runtime before main and
 * before LSAN_OPTIONS (which may still override them, flag by flag).
 *
 * LeakSanitizer counts a block as still in use when a word it scans holds its address. By default
 * it scans the stacks and registers of every thread too, and a pointer nothing will ever free may
 * linger there at exit: in a slot of main's frame that a noreturn call left, or a callee-saved
 * register spilled by exit(). Whether it does depends on the compiler, its version and the
 * lengths of the strings on the stack, so the same leak was reported on one machine and passed
 * on another. Here only globals and thread-local storage are roots: a block a program means to
 * keep is reachable from a global, and any other block not freed by exit is reported, on every
 * machine. test/plugin/sanitized-build.test.ts holds a build to that.
 *
 * Not for the libFuzzer harness (test/plugin/forwarder-fuzz.test.ts): libFuzzer keeps its own
 * blocks in its driver's frames until it exits, and finds a leak of one input by counting
 * mallocs against frees, which does not depend on the stack.
 */
const char *__lsan_default_options(void);

const char *__lsan_default_options(void) {
  return "use_stacks=0:use_registers=0";
}

/**
 * A mistake in how a command was called (a missing or unknown flag): the command line prints it
 * with the usage and exits 2, where a failed operation exits 1.
 */
export class UsageError extends Error {}

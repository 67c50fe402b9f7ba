/**
 * The logger for tests that do not read what is logged: pino itself, so every child, binding and
 * level call the code under test makes works as in the agent, at level `silent`, so nothing is
 * written. A test that asserts on log lines makes its own logger over a sink.
 */
import { type Logger, pino } from 'pino';

export const silentLogger: Logger = pino({ level: 'silent' });

/**
 * The rows of the settings table (settings/table.ts) of the reconcile passes: which network
 * namespace directories the agent may judge allocations by, how often it passes, and how long a
 * new allocation is spared.
 */
import { DEFAULT_NETNS_DIRS } from '../../sources/netns.ts';
import * as read from './readers.ts';
import type { Row } from './row.ts';

export const RECONCILE_ROWS = {
  netnsDirs: {
    flag: 'netns-dirs',
    env: 'WARREN_NETNS_DIRS',
    about: 'comma-separated netns directories the agent may judge, matched by real path; empty for none',
    default: DEFAULT_NETNS_DIRS.join(','),
    emptyIsAValue: true,
    read: read.directories,
  },
  netnsSweep: {
    flag: 'netns-sweep',
    env: 'WARREN_NETNS_SWEEP',
    about: 'on: release what a namespace gone held at once; off: `warren audit --fix` releases it',
    default: 'on',
    read: read.onOff,
  },
  reconcileIntervalSeconds: {
    flag: 'reconcile-interval',
    env: 'WARREN_RECONCILE_INTERVAL',
    about: 'seconds between reconcile passes',
    default: '10',
    read: read.seconds(0.05),
  },
  netnsGraceSeconds: {
    flag: 'netns-grace',
    env: 'WARREN_NETNS_GRACE',
    about: 'seconds a new allocation is spared from judgment by its namespace (a runtime that pins it after ADD)',
    default: '0',
    read: read.seconds(0),
  },
} satisfies Record<string, Row<unknown>>;

/**
 * Real etcd (Debian's etcd-server) for tests: one member or a cluster of several on loopback, each
 * member in its own data directory under a private temp dir, on ports the kernel handed out.
 * Members are stopped by PID (SIGKILL: the last member of a cluster can take seconds to leave on
 * SIGTERM, and a test never needs a graceful etcd exit) and their directories removed.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { type Server, createServer } from 'node:net';
import { join } from 'node:path';
import { HANG_BOUND_MS, StopWaiting, run, tempDir, track, untilReady, waitFor } from './processes.ts';

export const ETCD_BIN = '/usr/bin/etcd';
export const ETCDCTL_BIN = '/usr/bin/etcdctl';

export interface EtcdMember {
  readonly name: string;
  readonly clientURL: string;
  readonly peerURL: string;
  readonly dataDir: string;
  process: ChildProcess | undefined;
}

export interface EtcdCluster {
  readonly members: EtcdMember[];
  /** Client URLs of every member, for a client's endpoint list. */
  readonly endpoints: string[];
  kill(member: EtcdMember): Promise<void>;
  /** Restarts a killed member with its old data (joins as `existing`). */
  restart(member: EtcdMember): Promise<void>;
  /**
   * Kills a single-member cluster's member, removes its data directory and starts it again with
   * the same name, URLs and cluster token: an etcd that lost its data, as a wiped disk leaves it.
   */
  wipe(member: EtcdMember): Promise<void>;
  /** `etcdctl snapshot save` of a member's data into `path`: a backup, as an operator takes one. */
  snapshot(member: EtcdMember, path: string): Promise<void>;
  /**
   * A single-member cluster's member killed, its data directory replaced by `etcdctl snapshot
   * restore` of `path` (same name, peer URL and token), and started again: an etcd restored from a
   * backup, as the disaster-recovery procedure does it (etcd 3.4's etcdctl; etcdutl from 3.5 on).
   */
  restoreSnapshot(member: EtcdMember, path: string): Promise<void>;
  stop(): Promise<void>;
}

/** A port free at the moment of asking (the kernel's choice). */
export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port as number;
}

/**
 * `n` ports free at the moment of asking, all different: each is held open until all are chosen.
 * (Asked one after another, the kernel may hand out the port it just freed again: two members of
 * one cluster on one URL, which etcd refuses as "has duplicate url".)
 */
export async function freePorts(n: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < n; i++) {
      const server = createServer();
      servers.push(server);
      ports.push(
        await new Promise<number>((resolvePort, reject) => {
          server.once('error', reject);
          server.listen(0, '127.0.0.1', () => {
            const address = server.address();
            if (typeof address === 'object' && address !== null) resolvePort(address.port);
            else reject(new Error('no port'));
          });
        }),
      );
    }
    return ports;
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((closed) => server.close(() => closed()))));
  }
}

/** PEM files for serving clients over TLS and requiring client certificates. */
export interface EtcdTls {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
  /** A client certificate and key the members accept, for health checks. */
  readonly clientCert: string;
  readonly clientKey: string;
}

/**
 * `extraArgs` go to every member as they are (e.g. `--quota-backend-bytes`); without them etcd
 * runs with its defaults, which include no compaction of its history.
 */
export async function startEtcd(size = 1, tls?: EtcdTls, extraArgs: readonly string[] = []): Promise<EtcdCluster> {
  const dir = tempDir('warren-etcd-');
  const scheme = tls === undefined ? 'http' : 'https';
  const members: EtcdMember[] = [];
  const ports = await freePorts(2 * size);
  for (let i = 1; i <= size; i++) {
    const [client, peer] = [ports[2 * i - 2] as number, ports[2 * i - 1] as number];
    members.push({
      name: `m${i}`,
      clientURL: `${scheme}://127.0.0.1:${client}`,
      peerURL: `http://127.0.0.1:${peer}`,
      dataDir: join(dir, `m${i}`),
      process: undefined,
    });
  }
  const initialCluster = members.map((m) => `${m.name}=${m.peerURL}`).join(',');
  const launch = (m: EtcdMember, state: 'new' | 'existing'): void => {
    const child = spawn(
      ETCD_BIN,
      [
        '--name',
        m.name,
        '--data-dir',
        m.dataDir,
        '--listen-client-urls',
        m.clientURL,
        '--advertise-client-urls',
        m.clientURL,
        '--listen-peer-urls',
        m.peerURL,
        '--initial-advertise-peer-urls',
        m.peerURL,
        '--initial-cluster',
        initialCluster,
        '--initial-cluster-state',
        state,
        '--initial-cluster-token',
        `warren-test-${process.pid}`,
        // One member elects itself at once; several need room for a loaded machine's hiccups, or
        // leadership flaps and lease calls stall.
        '--heartbeat-interval',
        size === 1 ? '10' : '50',
        '--election-timeout',
        size === 1 ? '100' : '1000',
        ...(tls === undefined
          ? []
          : ['--cert-file', tls.cert, '--key-file', tls.key, '--trusted-ca-file', tls.ca, '--client-cert-auth']),
        ...extraArgs,
        '--log-level',
        'error',
        '--logger',
        'zap',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr?.on('data', (c: Buffer) => {
      stderr = (stderr + c.toString('utf8')).slice(-4000);
    });
    child.once('exit', (code, signal) => {
      if (code !== null && code !== 0) process.stderr.write(`etcd ${m.name} exited ${code}: ${stderr}\n`);
      void signal;
    });
    m.process = track(child);
  };
  for (const m of members) launch(m, 'new');
  const healthy = (m: EtcdMember): Promise<boolean> =>
    new Promise((resolveHealth) => {
      const get = tls === undefined ? httpGet : httpsGet;
      const options =
        tls === undefined
          ? {}
          : { ca: readFileSync(tls.ca), cert: readFileSync(tls.clientCert), key: readFileSync(tls.clientKey) };
      const request = get(`${m.clientURL}/health`, { ...options, timeout: 1000 }, (response) => {
        let body = '';
        response.on('data', (c: Buffer) => (body += c.toString('utf8')));
        response.on('end', () => {
          try {
            resolveHealth((JSON.parse(body) as { health?: string }).health === 'true');
          } catch {
            resolveHealth(false);
          }
        });
      });
      request.on('timeout', () => request.destroy());
      request.on('error', () => resolveHealth(false));
    });
  // A cluster that does not come up leaves no member behind (one would keep the test file alive).
  await untilReady(
    members.map((m) => m.process as ChildProcess),
    async () => {
      for (const m of members)
        await waitFor(`etcd member ${m.name} healthy`, async () => {
          // A member that exited (its stderr is printed) will not become healthy: said at once.
          const exited = members.find((x) => x.process?.exitCode !== null || x.process?.signalCode !== null);
          if (exited !== undefined) throw new StopWaiting(`etcd member ${exited.name} exited`);
          return (await healthy(m)) ? true : undefined;
        });
    },
  );

  const kill = async (m: EtcdMember): Promise<void> => {
    const child = m.process;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    m.process = undefined;
  };
  return {
    members,
    endpoints: members.map((m) => m.clientURL),
    kill,
    async restart(m) {
      await kill(m);
      launch(m, 'existing');
      await untilReady(m.process as ChildProcess, () =>
        waitFor(`etcd member ${m.name} healthy again`, async () => ((await healthy(m)) ? true : undefined)),
      );
    },
    async wipe(m) {
      if (members.length !== 1)
        throw new Error('wipe() restarts a single-member cluster only (a wiped member of several would join as new)');
      await kill(m);
      rmSync(m.dataDir, { recursive: true, force: true });
      launch(m, 'new');
      await waitFor(
        `etcd member ${m.name} healthy after its data was wiped`,
        async () => ((await healthy(m)) ? true : undefined),
        HANG_BOUND_MS,
      );
    },
    async snapshot(m, path) {
      const saved = await run(ETCDCTL_BIN, ['--endpoints', m.clientURL, 'snapshot', 'save', path], {
        env: { ...process.env, ETCDCTL_API: '3' },
      });
      if (saved.code !== 0) throw new Error(`etcdctl snapshot save failed: ${saved.stderr}`);
    },
    async restoreSnapshot(m, path) {
      if (members.length !== 1) throw new Error('restoreSnapshot() restores a single-member cluster only');
      await kill(m);
      await restoreMemberData(m, path, members);
      launch(m, 'new');
      await waitFor(
        `etcd member ${m.name} healthy after its restore`,
        async () => ((await healthy(m)) ? true : undefined),
        HANG_BOUND_MS,
      );
    },
    async stop() {
      for (const m of members) await kill(m);
    },
  };
}

/** A private CA with a server certificate for 127.0.0.1 and a client certificate, made by openssl. */
export async function makeTls(): Promise<EtcdTls> {
  const dir = tempDir('warren-tls-');
  const f = (name: string) => join(dir, name);
  const ssl = async (...args: string[]) => {
    const r = await run('openssl', args);
    if (r.code !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
  };
  await ssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.pem'),
    '-days',
    '2',
    '-subj',
    '/CN=warren-test-ca',
  );
  for (const [name, ext] of [
    ['server', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth'],
    ['client', 'extendedKeyUsage=clientAuth'],
  ] as const) {
    await ssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      f(`${name}.key`),
      '-out',
      f(`${name}.csr`),
      '-subj',
      `/CN=warren-test-${name}`,
    );
    writeFileSync(f(`${name}.ext`), ext);
    await ssl(
      'x509',
      '-req',
      '-in',
      f(`${name}.csr`),
      '-CA',
      f('ca.pem'),
      '-CAkey',
      f('ca.key'),
      '-CAcreateserial',
      '-out',
      f(`${name}.pem`),
      '-days',
      '2',
      '-extfile',
      f(`${name}.ext`),
    );
  }
  return {
    ca: f('ca.pem'),
    cert: f('server.pem'),
    key: f('server.key'),
    clientCert: f('client.pem'),
    clientKey: f('client.key'),
  };
}

/**
 * `etcdctl snapshot restore` of `path` into member `m`'s data directory (emptied first), as one of
 * `members` (its name, peer URL and the cluster token `startEtcd` gives every member): the disaster
 * recovery of a member; the cluster is the same one started again. The member must be stopped.
 */
export async function restoreMemberData(m: EtcdMember, path: string, members: readonly EtcdMember[]): Promise<void> {
  rmSync(m.dataDir, { recursive: true, force: true });
  const restored = await run(
    ETCDCTL_BIN,
    [
      'snapshot',
      'restore',
      path,
      '--name',
      m.name,
      '--data-dir',
      m.dataDir,
      '--initial-cluster',
      members.map((each) => `${each.name}=${each.peerURL}`).join(','),
      '--initial-advertise-peer-urls',
      m.peerURL,
      '--initial-cluster-token',
      `warren-test-${process.pid}`,
    ],
    { env: { ...process.env, ETCDCTL_API: '3' } },
  );
  if (restored.code !== 0) throw new Error(`etcdctl snapshot restore failed for ${m.name}: ${restored.stderr}`);
}

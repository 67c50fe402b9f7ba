/**
 * A throwaway certificate authority and one server certificate it signed, made by the openssl CLI
 * for a single test server. Keys are P-256 (an RSA key costs a noticeable fraction of a second per
 * run). The server certificate names each address in its subjectAltName, because a client that
 * dials `https://127.0.0.1` checks the IP SAN and ignores the common name. The files are written
 * into a directory the caller owns and removes; the PEM text is returned so nothing needs to reread
 * them. Where libfaketime is installed (scripts/setup.sh), the certificates are issued as if two days
 * ago (openssl 3.0 cannot set notBefore itself), as a cluster's certificates are older than its
 * nodes' clock steps: a node whose wall clock went back a day (the soak's clock fault) must still
 * trust its API server, as it would on a real cluster.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ServerCertificate {
  /** The CA certificate a client trusts (PEM). */
  readonly caPem: string;
  /** The server's certificate (PEM), signed by the CA. */
  readonly certPem: string;
  /** The server's private key (PEM). */
  readonly keyPem: string;
}

export interface ServerCertificateOptions {
  /** IP addresses for the subjectAltName; default 127.0.0.1. */
  readonly ips?: readonly string[];
  /** DNS names for the subjectAltName; default localhost. */
  readonly dnsNames?: readonly string[];
  /** Validity in days from now; default 2 (a test run never outlives it). */
  readonly days?: number;
}

/** Debian's libfaketime, to issue certificates as if earlier. */
const FAKETIME_LIBRARY = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1';
/** How long before now certificates are issued, where libfaketime lets openssl be told so. */
const BACKDATE_DAYS = 2;

/** Issues a fresh CA and a server certificate into `dir` (which must exist). Throws on openssl failure. */
export function issueServerCertificate(dir: string, options: ServerCertificateOptions = {}): ServerCertificate {
  const file = (name: string): string => join(dir, name);
  const backdate = existsSync(FAKETIME_LIBRARY) ? BACKDATE_DAYS : 0;
  const days = String((options.days ?? 2) + backdate);
  const env =
    backdate === 0
      ? process.env
      : { ...process.env, LD_PRELOAD: FAKETIME_LIBRARY, FAKETIME: `-${backdate}d`, FAKETIME_DONT_FAKE_MONOTONIC: '1' };
  const ssl = (...args: string[]): void => {
    execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'], env });
  };
  const key = (name: string): void =>
    ssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file(name));

  key('ca.key');
  ssl(
    'req',
    '-x509',
    '-new',
    '-key',
    file('ca.key'),
    '-out',
    file('ca.pem'),
    '-days',
    days,
    '-subj',
    '/CN=warren-fake-ca',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  );

  key('server.key');
  ssl('req', '-new', '-key', file('server.key'), '-out', file('server.csr'), '-subj', '/CN=warren-fake-server');
  const names = [
    ...(options.ips ?? ['127.0.0.1']).map((ip) => `IP:${ip}`),
    ...(options.dnsNames ?? ['localhost']).map((dns) => `DNS:${dns}`),
  ];
  writeFileSync(
    file('server.ext'),
    [
      `subjectAltName=${names.join(',')}`,
      'basicConstraints=CA:FALSE',
      'keyUsage=critical,digitalSignature',
      'extendedKeyUsage=serverAuth',
      '',
    ].join('\n'),
  );
  ssl(
    'x509',
    '-req',
    '-in',
    file('server.csr'),
    '-CA',
    file('ca.pem'),
    '-CAkey',
    file('ca.key'),
    '-set_serial',
    `0x${Date.now().toString(16)}`,
    '-out',
    file('server.pem'),
    '-days',
    days,
    '-extfile',
    file('server.ext'),
  );

  return {
    caPem: readFileSync(file('ca.pem'), 'utf8'),
    certPem: readFileSync(file('server.pem'), 'utf8'),
    keyPem: readFileSync(file('server.key'), 'utf8'),
  };
}

/**
 * What an etcd member says it was asked, from its own /metrics (gRPC's server counters): RPCs
 * started by method (`grpc_server_started_total`, a stream counted once when it opens) and messages
 * received by method (`grpc_server_msg_received_total`: each keep-alive on a lease's stream, each
 * watch created on a watch stream). Read over plain HTTP: tests' members serve their metrics there.
 */
import { get } from 'node:http';

export interface EtcdRequests {
  /** Method (`Range`, `Txn`, `Watch`, `LeaseKeepAlive`…) → RPCs started. */
  readonly started: Map<string, number>;
  /** Method → messages received from clients. */
  readonly received: Map<string, number>;
  /** Watchers open (`etcd_debugging_mvcc_watcher_total`), and the gRPC streams they share. */
  readonly watchers: number;
  readonly watchStreams: number;
}

const SAMPLE = /^(grpc_server_started_total|grpc_server_msg_received_total)\{([^}]*)\}\s+(\S+)$/;

function body(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    get(url, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve(text));
      response.on('error', reject);
    }).on('error', reject);
  });
}

/** The member at client URL `endpoint`'s counters now. */
export async function etcdRequests(endpoint: string): Promise<EtcdRequests> {
  const started = new Map<string, number>();
  const received = new Map<string, number>();
  const text = await body(new URL('/metrics', endpoint).href);
  const gauge = (name: string) => Number(new RegExp(`^${name}\\s+(\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  for (const line of text.split('\n')) {
    const m = SAMPLE.exec(line);
    if (m === null) continue;
    const method = /grpc_method="([^"]+)"/.exec(m[2] ?? '')?.[1];
    if (method === undefined) continue;
    const into = m[1] === 'grpc_server_started_total' ? started : received;
    into.set(method, (into.get(method) ?? 0) + Number(m[3]));
  }
  return {
    started,
    received,
    watchers: gauge('etcd_debugging_mvcc_watcher_total'),
    watchStreams: gauge('etcd_debugging_mvcc_watch_stream_total'),
  };
}

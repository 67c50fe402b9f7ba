import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { isWarrenError } from '../../src/core/errors.ts';
import { EtcdStore } from '../../src/store/etcd-store.ts';
import type { Store } from '../../src/store/store.ts';
import { type EtcdCluster, freePort, makeTls, startEtcd } from '../helpers/etcd.ts';
import { storeConformance } from './conformance.ts';

let etcd: EtcdCluster;
before(async () => {
  etcd = await startEtcd(1);
});
after(async () => {
  await etcd?.stop();
});

let serial = 0;
const prefixes = new WeakMap<Store, string>();

storeConformance('etcd (one member)', {
  async create() {
    serial += 1;
    const prefix = `/conformance-${serial}/`;
    const store = await EtcdStore.open({ endpoints: etcd.endpoints, prefix });
    prefixes.set(store, prefix);
    return store;
  },
  async reopen(store) {
    const prefix = prefixes.get(store) as string;
    return EtcdStore.open({ endpoints: etcd.endpoints, prefix });
  },
});

describe('etcd store', () => {
  it('refuses bad endpoints and unreadable TLS files by name', async () => {
    await assert.rejects(EtcdStore.open({ endpoints: [] }), /no endpoints/);
    await assert.rejects(EtcdStore.open({ endpoints: ['127.0.0.1:2379'] }), /"127\.0\.0\.1:2379" is not http/);
    await assert.rejects(
      EtcdStore.open({ endpoints: ['https://127.0.0.1:1'], tls: { ca: '/nonexistent/ca.pem' } }),
      /CA file \/nonexistent\/ca\.pem cannot be read/,
    );
  });

  it('fails fast with TRY_AGAIN naming etcd when nothing listens', async () => {
    const port = await freePort();
    const store = await EtcdStore.open({ endpoints: [`http://127.0.0.1:${port}`], prefix: '/nowhere/' });
    try {
      const started = Date.now();
      await assert.rejects(
        store.ping(),
        (error: unknown) => isWarrenError(error, 'TRY_AGAIN') && /etcd store unreachable/.test(error.message),
      );
      await assert.rejects(store.readPool('p'), (error: unknown) => isWarrenError(error, 'TRY_AGAIN'));
      // Not a timing assertion for correctness: a refused connection must not wait out a long deadline.
      assert.ok(Date.now() - started < 15_000);
    } finally {
      await store.close();
    }
  });

  it('names the pool whose document is corrupt instead of guessing', async () => {
    const { Etcd3 } = await import('etcd3');
    const raw = new Etcd3({ hosts: etcd.endpoints });
    const store = await EtcdStore.open({ endpoints: etcd.endpoints, prefix: '/corrupt/' });
    try {
      await raw.put('/corrupt/units/10.0.0.0/24').value('{"allocations": 7');
      await assert.rejects(
        store.readPool('10.0.0.0/24'),
        (e: unknown) => isWarrenError(e, 'IO_FAILURE') && /document of pool 10\.0\.0\.0\/24 is corrupt/.test(e.message),
      );
      await raw.put('/corrupt/owners/net/c1/eth0/p').value('not json');
      await assert.rejects(
        store.list(),
        (e: unknown) => isWarrenError(e, 'IO_FAILURE') && /allocation record .* is corrupt/.test(e.message),
      );
    } finally {
      raw.close();
      await store.close();
    }
  });

  it('talks to etcd over mutual TLS when given the CA, a client certificate and its key', async () => {
    const tls = await makeTls();
    const secure = await startEtcd(1, tls);
    try {
      const store = await EtcdStore.open({
        endpoints: secure.endpoints,
        prefix: '/tls/',
        tls: { ca: tls.ca, cert: tls.clientCert, key: tls.clientKey },
      });
      try {
        await store.ping();
        const r = await store.commit('p', 0, [{ op: 'claim', node: 'n1' }]);
        assert.equal(r.kind, 'committed');
      } finally {
        await store.close();
      }
      // Without a client certificate the member refuses, and Warren says etcd is unreachable.
      const anonymous = await EtcdStore.open({ endpoints: secure.endpoints, prefix: '/tls/', tls: { ca: tls.ca } });
      try {
        await assert.rejects(anonymous.ping(), (e: unknown) => isWarrenError(e, 'TRY_AGAIN'));
      } finally {
        await anonymous.close();
      }
      await assert.rejects(
        EtcdStore.open({ endpoints: secure.endpoints, tls: { ca: tls.ca, cert: tls.clientCert } }),
        /needs its key/,
      );
    } finally {
      await secure.stop();
    }
  });

  it('announces a node while it holds its lease and forgets it at withdraw', async () => {
    const store = await EtcdStore.open({ endpoints: etcd.endpoints, prefix: '/members/' });
    const observer = await EtcdStore.open({ endpoints: etcd.endpoints, prefix: '/members/' });
    try {
      await store.membership.announce('node-a', { since: 1, version: 'test' });
      assert.deepEqual(
        (await observer.membership.liveNodes()).map((n) => n.node),
        ['node-a'],
      );
      await store.membership.withdraw();
      assert.deepEqual(await observer.membership.liveNodes(), []);
    } finally {
      await store.close();
      await observer.close();
    }
  });
});

// RedisStore against a real server with the module, on the module's frozen debug clock.
'use strict';

const { describe, it, before, after, beforeEach } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { createClient } = require('redis');
const DefaultStore = require('..').default;
const { RedisStore, ioredisSendCommand } = require('..');
const { startServer, T0 } = require('./servers');

const WINDOW = 60000;

/** `resetTime` is the client's clock plus the server's milliseconds: bounded by the clock read
 * before and after the call. */
async function timed(call) {
  const before = Date.now();
  const result = await call();
  return { result, before, after: Date.now() };
}

function assertResetIn(t, ms) {
  const at = t.result.resetTime.getTime();
  assert.ok(at >= t.before + ms && at <= t.after + ms,
    `resetTime ${at} not within [${t.before + ms}, ${t.after + ms}]`);
}

describe('RedisStore (express-rate-limit) on RATELIMIT.ALLOW', () => {
  let server;
  let ioredis;
  let nodeRedis;
  const clients = {};

  before(async () => {
    server = await startServer();
    ioredis = new Redis({ port: server.port, host: '127.0.0.1' });
    nodeRedis = createClient({ socket: { port: server.port, host: '127.0.0.1' } });
    await nodeRedis.connect();
    // The three ways a store is given its client, as rate-limit-redis documents them, and ours.
    clients['ioredis call'] = { sendCommand: (command, ...args) => ioredis.call(command, ...args) };
    clients['node-redis sendCommand'] = { sendCommand: (...args) => nodeRedis.sendCommand(args) };
    clients.ioredisSendCommand = { sendCommandCluster: ioredisSendCommand(ioredis) };
  });

  after(async () => {
    ioredis.disconnect();
    await nodeRedis.quit();
    await server.stop();
  });

  beforeEach(async () => {
    await server.admin.flushall();
    await server.admin.call('RATELIMIT.DEBUG', 'SETCLOCK', String(T0));
  });

  for (const client of ['ioredis call', 'node-redis sendCommand', 'ioredisSendCommand']) {
    it(`counts hits in a sliding window (${client})`, async () => {
      const store = new RedisStore({ ...clients[client] });
      store.init({ limit: 3, windowMs: WINDOW });
      const hits = [];
      // ONEKEY's default precision is a sixtieth of the window (1 s): the three hits share the
      // bucket of T0 and are logged at its last millisecond, T0 + 999. The whole limit is free
      // again one window after that.
      for (const [advance, reset] of [[0, 60999], [100, 60899], [100, 60799]]) {
        await server.admin.call('RATELIMIT.DEBUG', 'ADVANCE', String(advance));
        const t = await timed(() => store.increment('alice'));
        hits.push(t.result.totalHits);
        assertResetIn(t, reset);
      }
      assert.deepEqual(hits, [1, 2, 3]);

      // Refused: limit + 1, and nothing is logged, so every refusal says the same; the reset is
      // when this request could be taken (the bucket of the hits leaves the window).
      for (const expected of [60799, 60799]) {
        const t = await timed(() => store.increment('alice'));
        assert.equal(t.result.totalHits, 4);
        assertResetIn(t, expected);
      }
      assert.equal(await server.admin.call('RATELIMIT.AVAILABLE', 'rl:alice'), 0);

      // Never early: a millisecond before the bucket leaves the window, still refused; then the
      // three hits leave together, at most 999 ms late.
      await server.admin.call('RATELIMIT.DEBUG', 'ADVANCE', String(60798));
      assert.equal((await store.increment('alice')).totalHits, 4);
      await server.admin.call('RATELIMIT.DEBUG', 'ADVANCE', '1');
      assert.equal((await store.increment('alice')).totalHits, 1);
      // Another client has a window of its own.
      assert.equal((await store.increment('bob')).totalHits, 1);
    });
  }

  it('names each limiter prefix + key, with the limit, window and keep-alive of the middleware', async () => {
    const store = new RedisStore({ ...clients['ioredis call'], prefix: 'test-' });
    store.init({ limit: 10, windowMs: 10000 });
    await store.increment('store');
    // One string key under the limiter's name (ONEKEY), none of Redisson's layout.
    assert.equal(await server.admin.type('test-store'), 'string');
    assert.deepEqual(await server.admin.call('RATELIMIT.CONFIG', 'test-store'),
      ['rate', 10, 'interval', 10000, 'type', 'ONEKEY', 'keepAliveTime', 10000]);
    assert.equal(await server.admin.exists('{test-store}:value', '{test-store}:permits'), 0);
    assert.equal(await server.admin.call('RATELIMIT.AVAILABLE', 'test-store'), 9);
    // KEEPALIVE = the window: an idle client's key goes away by itself.
    const ttl = await server.admin.pttl('test-store');
    assert.ok(ttl > 0 && ttl <= 10000, `ttl ${ttl}`);
  });

  it('decrement gives a taken permit back', async () => {
    const store = new RedisStore({ ...clients['node-redis sendCommand'] });
    store.init({ limit: 2, windowMs: WINDOW });
    await store.increment('k');
    await store.increment('k');
    assert.equal((await store.increment('k')).totalHits, 3);
    await store.decrement('k');
    assert.equal((await store.increment('k')).totalHits, 2);
    // A decrement after the limiter expired (or was reset) gives nothing back and is no error.
    await store.resetKey('k');
    await store.decrement('k');
    assert.equal(await server.admin.exists('rl:k'), 0);
  });

  it('with skipFailedRequests, the decrement of a refused request gives nothing back', async () => {
    const store = new RedisStore({ ...clients['ioredis call'] });
    store.init({ limit: 2, windowMs: WINDOW, skipFailedRequests: true });
    await store.increment('k');
    await store.increment('k');
    assert.equal((await store.increment('k')).totalHits, 3); // refused: took nothing
    await store.decrement('k'); // express-rate-limit hands the 429 back
    assert.equal(await server.admin.call('RATELIMIT.AVAILABLE', 'rl:k'), 0);
    assert.equal((await store.increment('k')).totalHits, 3); // still full: nothing was released
    await store.decrement('k');
    await store.decrement('k'); // a granted request that failed: its permit comes back
    assert.equal(await server.admin.call('RATELIMIT.AVAILABLE', 'rl:k'), 1);
  });

  it('resetKey starts a fresh window', async () => {
    const store = new RedisStore({ ...clients['ioredis call'] });
    store.init({ limit: 2, windowMs: WINDOW });
    await store.increment('k');
    await store.increment('k');
    await store.resetKey('k');
    assert.equal(await server.admin.exists('rl:k'), 0);
    assert.equal((await store.increment('k')).totalHits, 1);
  });

  it('get reads the hits in the window and the reset in one RATELIMIT.PEEK, writing nothing', async () => {
    const store = new RedisStore({ ...clients['ioredis call'] });
    store.init({ limit: 5, windowMs: WINDOW });
    assert.equal(await store.get('k'), undefined);
    await store.increment('k');
    await server.admin.call('RATELIMIT.DEBUG', 'ADVANCE', '1000');
    await store.increment('k');
    await server.admin.call('RATELIMIT.DEBUG', 'ADVANCE', '300');
    const state = await server.admin.getBuffer('rl:k');
    await server.admin.call('CONFIG', 'RESETSTAT');
    // The hits of T0 and T0 + 1000, logged at T0 + 999 and T0 + 1999: the whole limit is free
    // again at T0 + 61 999, 60 699 ms from now.
    let t = await timed(() => store.get('k'));
    assert.equal(t.result.totalHits, 2);
    assertResetIn(t, 60699);
    assert.ok(state.equals(await server.admin.getBuffer('rl:k')), 'get wrote');
    const stats = await server.admin.info('commandstats');
    assert.match(stats, /cmdstat_ratelimit\.peek:calls=1,/);
    assert.doesNotMatch(stats, /cmdstat_eval/);
    // The first hit has left: one remains, until its own bucket leaves.
    await server.admin.call('RATELIMIT.DEBUG', 'ADVANCE', '59699');
    t = await timed(() => store.get('k'));
    assert.equal(t.result.totalHits, 1);
    assertResetIn(t, 1000);
    await server.admin.call('RATELIMIT.DEBUG', 'ADVANCE', '1000');
    t = await timed(() => store.get('k'));
    assert.equal(t.result.totalHits, 0);
    assertResetIn(t, 0);
  });

  it('a key with a hash tag: the limiter is that one key, get finds it', async () => {
    const store = new RedisStore({ ...clients['ioredis call'] });
    store.init({ limit: 5, windowMs: WINDOW });
    await store.increment('{tenant-1}:alice');
    assert.equal(await server.admin.type('rl:{tenant-1}:alice'), 'string');
    assert.equal((await store.get('{tenant-1}:alice')).totalHits, 1);
  });

  it('a limiter made with another rate keeps it; hits stay within 1..limit', async () => {
    await server.admin.call('RATELIMIT.SETRATE', 'rl:k', '100', String(WINDOW), 'ONEKEY');
    const store = new RedisStore({ ...clients['ioredis call'] });
    store.init({ limit: 2, windowMs: WINDOW });
    assert.equal((await store.increment('k')).totalHits, 1);
    assert.equal((await store.increment('k')).totalHits, 1);
  });

  it('a three-key limiter made before the switch to ONEKEY keeps serving, get reads it', async () => {
    // A limiter of an earlier version of the store (Redisson's three keys): RATE never changes
    // an existing limiter's form, so it serves until its keep-alive expires it.
    await server.admin.call('RATELIMIT.ALLOW', 'rl:old', '1', 'RATE', '3', String(WINDOW),
      'KEEPALIVE', String(WINDOW));
    const store = new RedisStore({ ...clients['ioredis call'] });
    store.init({ limit: 3, windowMs: WINDOW });
    assert.equal((await store.increment('old')).totalHits, 2);
    assert.equal(await server.admin.type('rl:old'), 'hash');
    const t = await timed(() => store.get('old'));
    assert.equal(t.result.totalHits, 2);
    assertResetIn(t, WINDOW);
  });

  it('refuses options it cannot honour, with rate-limit-redis’s messages where it has them', () => {
    assert.throws(() => new RedisStore(), /options object is required/);
    assert.throws(() => new RedisStore({}), /either sendCommand or sendCommandCluster/);
    assert.throws(() => new RedisStore({ sendCommand() {}, sendCommandCluster() {} }),
      /either sendCommand or sendCommandCluster/);
    assert.throws(() => new RedisStore({ sendCommand() {}, resetExpiryOnChange: true }),
      /resetExpiryOnChange/);
    const store = new RedisStore({ sendCommand() {} });
    assert.throws(() => store.init({ limit: () => 5, windowMs: 1000 }), /limit must be an integer/);
    assert.throws(() => store.init({ limit: 0, windowMs: 1000 }), /limit must be an integer/);
    assert.throws(() => store.init({ limit: 5, windowMs: 0.5 }), /windowMs must be an integer/);
    return assert.rejects(store.increment('k'), /not initialized/);
  });

  it('the default export, and sendCommand bound to the store', async () => {
    let self;
    const store = new DefaultStore({
      sendCommand(...args) { self = this; return ioredis.call(...args); },
    });
    store.init({ limit: 1, windowMs: WINDOW });
    assert.equal((await store.increment('k')).totalHits, 1);
    assert.equal(self, store);
    let selfCluster;
    const clusterStore = new RedisStore({
      sendCommandCluster(details) { selfCluster = this; return ioredis.call(...details.command); },
    });
    clusterStore.init({ limit: 1, windowMs: WINDOW });
    assert.equal((await clusterStore.increment('j')).totalHits, 1);
    assert.equal(selfCluster, clusterStore);
  });

  it('a RESP3 client (node-redis, map replies) reads the same', async () => {
    const resp3 = createClient({ socket: { port: server.port, host: '127.0.0.1' }, RESP: 3 });
    await resp3.connect();
    try {
      const store = new RedisStore({ sendCommand: (...args) => resp3.sendCommand(args) });
      store.init({ limit: 1, windowMs: WINDOW });
      assert.equal((await store.increment('k')).totalHits, 1);
      assert.equal((await store.increment('k')).totalHits, 2);
      assert.equal((await store.get('k')).totalHits, 1);
    } finally {
      await resp3.quit();
    }
  });
});

// The example Express app (example/app.js) with express-rate-limit and RedisStore, over HTTP,
// against a real server and a real 3-master cluster, on the module's frozen debug clock.
'use strict';

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { createClient, createCluster } = require('redis');
const { ioredisSendCommand } = require('..');
const { createApp } = require('../example/app');
const { startServer, startCluster, T0 } = require('./servers');

const WINDOW = 60000;
const LIMIT = 3;

async function listen(app) {
  const server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

/** One request as `user`, with the client's clock read before and after it. */
async function request(url, user) {
  const before = Date.now();
  const res = await fetch(`${url}/`, { headers: { 'X-User': user } });
  const body = await res.text();
  return { status: res.status, headers: res.headers, body, before, after: Date.now() };
}

/** A header in seconds that stands for `ms` of the server's: express-rate-limit rounds up the
 * time left when it writes it, so it lies between the rounding at the request's end and ms. */
function assertSeconds(r, name, ms) {
  const got = Number(r.headers.get(name));
  const low = Math.max(0, Math.ceil((ms - (r.after - r.before)) / 1000));
  assert.ok(got >= low && got <= Math.ceil(ms / 1000), `${name}: ${got} not within [${low}, ${Math.ceil(ms / 1000)}]`);
}

/** ONEKEY's default precision, a sixtieth of the window: a hit is logged at the end of its
 * bucket, so it leaves the window up to BUCKET - 1 ms late, never early. */
const BUCKET = WINDOW / 60;

/**
 * The limit as a client of the API sees it: 3 requests a minute, spread a second apart, then a
 * 429 whose Retry-After is when the first leaves the window; one window after the first (and
 * the end of its bucket), one request goes through (a fixed window would have given all 3 back)
 * and the next is refused. `advance(ms)` moves the module clock of the server(s) serving the
 * user and returns it.
 */
async function exerciseUser(url, user, advance) {
  const now = Number(await advance(0));
  await advance((BUCKET - (now % BUCKET)) % BUCKET); // the start of a bucket
  const late = BUCKET - 1;
  for (let i = 0; i < LIMIT; i += 1) {
    if (i > 0) await advance(1000);
    const r = await request(url, user);
    assert.equal(r.status, 200, r.body);
    assert.equal(r.body, `hello ${user}\n`);
    assert.equal(r.headers.get('ratelimit-limit'), String(LIMIT));
    assert.equal(r.headers.get('ratelimit-remaining'), String(LIMIT - 1 - i));
    assert.equal(r.headers.get('ratelimit-policy'), `${LIMIT};w=60`);
    assertSeconds(r, 'ratelimit-reset', WINDOW + late);
    assert.equal(r.headers.get('retry-after'), null);
  }
  const refused = await request(url, user);
  assert.equal(refused.status, 429);
  assert.equal(refused.headers.get('ratelimit-remaining'), '0');
  assertSeconds(refused, 'retry-after', WINDOW - 2000 + late);
  assertSeconds(refused, 'ratelimit-reset', WINDOW - 2000 + late);

  await advance(WINDOW - 2000 + late - 1);
  assert.equal((await request(url, user)).status, 429, 'never early');
  await advance(1); // the first request leaves the window
  const again = await request(url, user);
  assert.equal(again.status, 200);
  assert.equal(again.headers.get('ratelimit-remaining'), '0');
  const next = await request(url, user);
  assert.equal(next.status, 429);
  assertSeconds(next, 'retry-after', 1000); // when the second request leaves the window
}

describe('an Express app with express-rate-limit and RedisStore, one server', () => {
  let server;
  let redis;
  let app;
  const advance = (ms) => server.admin.call('RATELIMIT.DEBUG', 'ADVANCE', String(ms));

  before(async () => {
    server = await startServer();
    await server.admin.call('RATELIMIT.DEBUG', 'SETCLOCK', String(T0));
    redis = new Redis({ port: server.port, host: '127.0.0.1' });
    app = await listen(createApp({ sendCommand: (command, ...args) => redis.call(command, ...args) },
      { limit: LIMIT, windowMs: WINDOW }));
  });

  after(async () => {
    app.close();
    redis.disconnect();
    await server.stop();
  });

  it('answers 429 with RateLimit-* and Retry-After at the fourth request in the window', async () => {
    await exerciseUser(app.url, 'alice', advance);
    // Each user has a limiter of their own, made on first use with the middleware's limit.
    assert.equal((await request(app.url, 'bob')).headers.get('ratelimit-remaining'), '2');
    assert.deepEqual(await server.admin.call('RATELIMIT.CONFIG', 'api:bob'),
      ['rate', 3, 'interval', 60000, 'type', 'ONEKEY', 'keepAliveTime', 60000]);
  });
});

describe('the same app on a 3-master cluster: every command on its key’s master', () => {
  let cluster;
  const users = [];

  before(async () => {
    cluster = await startCluster();
    await Promise.all(cluster.nodes.map((n) => n.admin.call('RATELIMIT.DEBUG', 'SETCLOCK', String(T0))));
    // Users whose limiters live on each of the three masters.
    const seen = new Set();
    for (let i = 0; seen.size < 3; i += 1) {
      const node = await cluster.nodeOf(`api:user-${i}`);
      if (!seen.has(node.port)) {
        seen.add(node.port);
        users.push({ name: `user-${i}`, node });
      }
    }
  });

  after(async () => {
    await cluster.stop();
  });

  const clients = {
    'ioredis Cluster, ioredisSendCommand': async () => {
      const redis = new Redis.Cluster(cluster.seeds);
      return { store: { sendCommandCluster: ioredisSendCommand(redis) }, close: () => redis.disconnect() };
    },
    'node-redis cluster, sendCommandCluster': async () => {
      const redis = createCluster({ rootNodes: cluster.seeds.map((s) => ({ socket: s })) });
      await redis.connect();
      return {
        store: { sendCommandCluster: ({ key, isReadOnly, command }) => redis.sendCommand(key, isReadOnly, command) },
        close: () => redis.close(),
      };
    },
  };

  for (const [name, connect] of Object.entries(clients)) {
    it(`429 at the right request for users on every master (${name}), no MOVED or CROSSSLOT`, async () => {
      await Promise.all(cluster.nodes.map((n) => n.admin.call('CONFIG', 'RESETSTAT')));
      const client = await connect();
      const app = await listen(createApp(client.store, { limit: LIMIT, windowMs: WINDOW }));
      try {
        for (const { name: user, node } of users) {
          await Promise.all(cluster.nodes.map((n) => n.admin.flushall()));
          const advance = (ms) => node.admin.call('RATELIMIT.DEBUG', 'ADVANCE', String(ms));
          await exerciseUser(app.url, user, advance);
          // The limiter is on the master that serves its slot.
          assert.equal(await node.admin.type(`api:${user}`), 'string');
        }
        assert.deepEqual(await cluster.redirections(), []);
      } finally {
        app.close();
        await client.close();
      }
    });
  }

  it('the check sees MOVED: ioredis’s plain call() sends the module’s commands to a random master', async () => {
    await Promise.all(cluster.nodes.map((n) => n.admin.call('CONFIG', 'RESETSTAT')));
    const redis = new Redis.Cluster(cluster.seeds);
    // A master drawn for each call: with one call per user, all three land on their own master
    // once in 27 runs (CI saw it); with 20 per user, once in 3^60.
    try {
      for (let round = 0; round < 20; round += 1) {
        for (const { name } of users) {
          await redis.call('RATELIMIT.ALLOW', `api:${name}`, '1', 'RATE', '3', '60000');
        }
      }
    } finally {
      redis.disconnect();
    }
    assert.ok((await cluster.redirections()).some((l) => l.startsWith('errorstat_MOVED')));
  });
});

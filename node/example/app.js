// An Express API limited by express-rate-limit with ratelimit-node's store: per user, 10
// requests a minute on an exact sliding window, the standard RateLimit-* headers, 429 with
// Retry-After.
//
//   REDIS_URL=redis://127.0.0.1:6379 PORT=8080 node example/app.js
//   curl -i -H 'X-User: alice' http://127.0.0.1:8080/
//
// With REDIS_CLUSTER=host:port[,host:port...] it uses a Redis Cluster seeded with those nodes.
'use strict';

const express = require('express');
const { rateLimit, ipKeyGenerator } = require('express-rate-limit');
const Redis = require('ioredis');
// The one line that differs from rate-limit-redis's example:
const { RedisStore, ioredisSendCommand } = require('ratelimit-node');

// `client` is how the store reaches Redis: rate-limit-redis's `sendCommand` or
// `sendCommandCluster` option.
function createApp(client, { limit = 10, windowMs = 60_000 } = {}) {
  const app = express();
  app.use(rateLimit({
    windowMs,
    limit,
    standardHeaders: 'draft-6',
    legacyHeaders: false,
    // A real API keys by its authenticated user; the header lets you try it with curl.
    keyGenerator: (req) => req.get('x-user') ?? ipKeyGenerator(req.ip),
    store: new RedisStore({ ...client, prefix: 'api:' }),
  }));
  app.get('/', (req, res) => res.type('text').send(`hello ${req.get('x-user') ?? 'anonymous'}\n`));
  return app;
}

function connect() {
  const seeds = process.env.REDIS_CLUSTER;
  if (!seeds) return new Redis(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
  return new Redis.Cluster(seeds.split(',').map((seed) => {
    const [host, port] = seed.split(':');
    return { host, port: Number(port) };
  }));
}

if (require.main === module) {
  const port = Number(process.env.PORT || 8080);
  // ioredisSendCommand sends each command straight to its key's node in a cluster; with one
  // server, `sendCommand: (command, ...args) => redis.call(command, ...args)` is the same.
  createApp({ sendCommandCluster: ioredisSendCommand(connect()) }).listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`));
}

module.exports = { createApp };

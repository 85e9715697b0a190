// Per-user rate limiting for node:http (or Express/Connect) with one RATELIMIT.ALLOW call per
// request.
//
//   REDIS_URL=redis://127.0.0.1:6379 PORT=8080 node app.js
//   curl -i -H 'X-User: alice' http://127.0.0.1:8080/
//
// With REDIS_CLUSTER=host:port[,host:port...] it uses a Redis Cluster seeded with those nodes
// instead (see `send` for how each command reaches the node that serves its key).
//
// Requests are keyed by the X-User header (use your authenticated user id in a real app), or by
// the remote address. Each user's limiter is created by its first request (RATE) and removed by
// Redis once the user is idle for a whole interval (KEEPALIVE), so no setup call is needed.
'use strict';

const http = require('node:http');
const Redis = require('ioredis');

const LIMIT = 10; // requests per user ...
const INTERVAL_MS = 60_000; // ... per minute
const REPORTS_TIMEOUT_MS = 1_000; // /report waits at most this long for its turn
const DAY_MS = 86_400_000;
// /search also has limits of its own per user, taken together with RATELIMIT.ALLOWALL.
const SEARCH_LIMITS = [['minute', 3, 60_000], ['day', 100, DAY_MS]];

// Milliseconds as whole seconds, rounded up: a client that waits this long is never early.
const seconds = (ms) => String(Math.ceil(ms / 1000));

const userOf = (req) => req.headers['x-user'] || req.socket.remoteAddress;

// ioredis finds a command's keys in its own command table, which has none of the module's
// commands (nor GCRA): a Cluster would send them to a random master, which answers MOVED, and
// refresh its whole slot map each time. A command that names its keys goes straight to the master
// of their slot; with a single server it is an ordinary command.
class KeyedCommand extends Redis.Command {
  constructor(name, args, keys) {
    super(name, args, { replyEncoding: 'utf8' }); // as redis.call() replies
    this.routingKeys = keys;
  }

  getKeys() {
    return this.routingKeys;
  }
}

// Sends `name key args...`; `keys` are the command's keys (for RATELIMIT.ALLOWALL: the keys after
// numkeys), the first of which picks the node.
const send = (redis, name, args, keys = [args[0]]) =>
  redis.sendCommand(new KeyedCommand(name, args, keys));

// Connect-style middleware: 429 with Retry-After once a user is over the limit, X-RateLimit-*
// always.
function rateLimit(redis, { limit = LIMIT, intervalMs = INTERVAL_MS } = {}) {
  // KEEPALIVE = interval: an idle limiter expires only when all its permits have.
  const rate = ['RATE', limit, intervalMs, 'OVERALL', 'KEEPALIVE', intervalMs];
  return async (req, res, next) => {
    let reply;
    try {
      reply = await send(redis, 'RATELIMIT.ALLOW', [`api:user:${userOf(req)}`, ...rate]);
    } catch (err) {
      res.writeHead(503, { 'Content-Type': 'text/plain' }).end('rate limiter unavailable\n');
      return;
    }
    const r = {}; // RESP2: name, value, name, value ...
    for (let i = 0; i < reply.length; i += 2) r[reply[i]] = reply[i + 1];
    res.setHeader('X-RateLimit-Limit', r.limit);
    res.setHeader('X-RateLimit-Remaining', r.remaining);
    res.setHeader('X-RateLimit-Reset', seconds(r.reset_after));
    if (!r.allowed) {
      res.setHeader('Retry-After', seconds(r.retry_after));
      res.writeHead(429, { 'Content-Type': 'text/plain' }).end('too many requests\n');
      return;
    }
    next();
  };
}

// RATELIMIT.ACQUIRE: waits in Redis, first come first served, up to timeoutMs. Resolves to null
// once the permit is ours, else to the wait hint in ms. A connection of its own: ioredis sends all
// of a client's commands down one connection, so a blocked ACQUIRE would hold up every command
// behind it. Its commandTimeout outlasts TIMEOUT, and disconnect() closes the socket whatever
// happens, so no waiter is ever left queued in Redis to take a permit nobody uses.
async function acquire(redis, key, timeoutMs) {
  const options = { commandTimeout: timeoutMs + 5000, autoResendUnfulfilledCommands: false };
  const waiter = redis instanceof Redis.Cluster
    ? redis.duplicate([], { redisOptions: options })
    : redis.duplicate(options);
  try {
    return await send(waiter, 'RATELIMIT.ACQUIRE', [key, 'TIMEOUT', timeoutMs,
      'RATE', 1, 60_000, 'KEEPALIVE', 60_000]);
  } finally {
    waiter.disconnect();
  }
}

// RATELIMIT.ALLOWALL: a permit from each of the user's search limits, or from none of them.
// ALLOWALL takes no RATE: the limiters are made with SETRATE ... NX when it says they are
// missing. Their keys share a hash tag, hence a slot in a cluster; `send` is told all of them.
async function allowAll(redis, user) {
  const keys = SEARCH_LIMITS.map(([name]) => `{search:${user}}:${name}`);
  const allowAllOnce = () => send(redis, 'RATELIMIT.ALLOWALL', [keys.length, ...keys], keys);
  try {
    return await allowAllOnce();
  } catch (err) {
    if (!err.message.includes('not initialized')) throw err;
  }
  for (const [i, [, rate, interval]] of SEARCH_LIMITS.entries()) {
    await send(redis, 'RATELIMIT.SETRATE', [keys[i], rate, interval, 'KEEPALIVE', DAY_MS, 'NX']);
  }
  return allowAllOnce();
}

async function app(redis, req, res) {
  if (req.url === '/search') {
    const reply = await allowAll(redis, userOf(req));
    const r = {}; // RESP2: name, value, name, value ...
    for (let i = 0; i < reply.length; i += 2) r[reply[i]] = reply[i + 1];
    if (!r.allowed) {
      res.writeHead(429, { 'Retry-After': seconds(r.retry_after), 'Content-Type': 'text/plain' });
      res.end(`search limit reached: ${r.limited_by}\n`);
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end(`results for ${userOf(req)}\n`);
    return;
  }
  if (req.url === '/report') {
    // Expensive reports: one a minute across all users; wait briefly for a turn.
    const wait = await acquire(redis, 'reports', REPORTS_TIMEOUT_MS);
    if (wait !== null) {
      res.writeHead(503, { 'Retry-After': seconds(wait), 'Content-Type': 'text/plain' });
      res.end('reports are busy\n');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end(`report for ${userOf(req)}\n`);
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/plain' }).end(`hello ${userOf(req)}\n`);
}

// A client of REDIS_CLUSTER's cluster if set, else of the server at REDIS_URL.
function connect() {
  const seeds = process.env.REDIS_CLUSTER;
  if (!seeds) return new Redis(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
  return new Redis.Cluster(seeds.split(',').map((seed) => {
    const [host, port] = seed.split(':');
    return { host, port: Number(port) };
  }));
}

const redis = connect();
const limiter = rateLimit(redis);
const port = Number(process.env.PORT || 8080);
http
  .createServer((req, res) => {
    limiter(req, res, () =>
      app(redis, req, res).catch((err) => {
        console.error(err);
        if (!res.headersSent) res.writeHead(500);
        res.end();
      }));
  })
  .listen(port, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${port}`));

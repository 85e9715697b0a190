// Per-user rate limiting for node:http (or Express/Connect) with one RATELIMIT.ALLOW call per
// request.
//
//   REDIS_URL=redis://127.0.0.1:6379 PORT=8080 node app.js
//   curl -i -H 'X-User: alice' http://127.0.0.1:8080/
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

// Milliseconds as whole seconds, rounded up: a client that waits this long is never early.
const seconds = (ms) => String(Math.ceil(ms / 1000));

const userOf = (req) => req.headers['x-user'] || req.socket.remoteAddress;

// Connect-style middleware: 429 with Retry-After once a user is over the limit, X-RateLimit-*
// always.
function rateLimit(redis, { limit = LIMIT, intervalMs = INTERVAL_MS } = {}) {
  // KEEPALIVE = interval: an idle limiter expires only when all its permits have.
  const rate = ['RATE', limit, intervalMs, 'OVERALL', 'KEEPALIVE', intervalMs];
  return async (req, res, next) => {
    let reply;
    try {
      reply = await redis.call('RATELIMIT.ALLOW', `api:user:${userOf(req)}`, ...rate);
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
  const waiter = redis.duplicate({
    commandTimeout: timeoutMs + 5000,
    autoResendUnfulfilledCommands: false,
  });
  try {
    return await waiter.call('RATELIMIT.ACQUIRE', key, 'TIMEOUT', timeoutMs,
      'RATE', 1, 60_000, 'KEEPALIVE', 60_000);
  } finally {
    waiter.disconnect();
  }
}

async function app(redis, req, res) {
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

const redis = new Redis(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
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

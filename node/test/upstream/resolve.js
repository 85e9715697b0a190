// Preloaded into the upstream suites (`mocha --require`, jest's setupFiles): module resolution
// only, no test file edited. The suite's `require('../lib/RateLimiterRedis')` gets this
// package's drop-in, every other `../lib/X` rate-limiter-flexible's own file (the version
// node/package-lock.json pins, the instance our class extends), `ioredis` and `redis` the
// suite's pinned clients (one copy, ours included) with the suite's fixed 127.0.0.1:6379 turned
// into the port of the server the runner started.
'use strict';

const Module = require('node:module');
const path = require('node:path');

const SUITE_DIR = process.env.UPSTREAM_SUITE_DIR; // the extracted test/ directory
const NODE_PKG = process.env.RATELIMIT_NODE_DIR; // this repository's node/
const DEPS = process.env.UPSTREAM_DEPS_DIR; // target/node-upstream/node_modules
const PORT = Number(process.env.UPSTREAM_REDIS_PORT);
if (!SUITE_DIR || !NODE_PKG || !DEPS || !Number.isInteger(PORT)) {
  throw new Error('resolve.js: set UPSTREAM_SUITE_DIR, RATELIMIT_NODE_DIR, UPSTREAM_DEPS_DIR, UPSTREAM_REDIS_PORT');
}

const FLEXIBLE_LIB = path.join(NODE_PKG, 'node_modules', 'rate-limiter-flexible', 'lib');
const redirects = {
  ioredis: path.join(__dirname, 'ioredis-port.js'),
  redis: path.join(__dirname, 'redis-port.js'),
};
const real = {
  ioredis: require.resolve('ioredis', { paths: [DEPS] }),
  redis: require.resolve('redis', { paths: [DEPS] }),
};

const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function resolveUpstream(request, parent, ...rest) {
  const from = parent && parent.filename ? parent.filename : '';
  if (from.startsWith(SUITE_DIR + path.sep)) {
    const lib = /^\.\.\/lib\/(.+)$/.exec(request);
    if (lib) {
      if (lib[1] === 'RateLimiterRedis') return path.join(__dirname, 'flexible-redis.js');
      return resolveFilename.call(this, path.join(FLEXIBLE_LIB, lib[1]), parent, ...rest);
    }
  }
  if (request in redirects) {
    // The port-rewriting wrappers themselves load the real client.
    if (from === redirects[request]) return real[request];
    return redirects[request];
  }
  return resolveFilename.call(this, request, parent, ...rest);
};

module.exports = { PORT };

// ioredis as the upstream suites use it, with their fixed port 6379 pointed at the runner's server.
'use strict';

const Redis = require('ioredis'); // resolve.js hands this file the real ioredis
const { PORT } = require('./resolve');

const ported = (opts) => (opts && typeof opts === 'object' && Number(opts.port) === 6379
  ? { ...opts, port: PORT } : opts);

class PortedRedis extends Redis {
  constructor(...args) {
    if (args.length === 0) super(PORT, '127.0.0.1');
    else if (Number(args[0]) === 6379 && typeof args[0] !== 'object') super(PORT, ...args.slice(1));
    else super(...args.map(ported));
  }
}

module.exports = PortedRedis;
Object.defineProperty(PortedRedis, 'default', { value: PortedRedis });

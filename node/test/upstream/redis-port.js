// node-redis as the upstream suites use it, with their fixed port 6379 pointed at the runner's
// server.
'use strict';

const redis = require('redis'); // resolve.js hands this file the real node-redis
const { PORT } = require('./resolve');

const portedSocket = (socket) => (socket && Number(socket.port) === 6379
  ? { ...socket, port: PORT } : socket);
const portedUrl = (url) => (typeof url === 'string'
  ? url.replace(/^(rediss?:\/\/[^/]*:)6379(\/|$)/, `$1${PORT}$2`) : url);
const ported = (opts = {}) => ({
  ...opts,
  ...(opts.socket ? { socket: portedSocket(opts.socket) } : {}),
  ...(opts.url ? { url: portedUrl(opts.url) } : {}),
});

module.exports = {
  ...redis,
  createClient: (opts) => redis.createClient(ported(opts)),
  createCluster: (opts) => redis.createCluster({
    ...opts,
    rootNodes: (opts.rootNodes || []).map(ported),
  }),
};

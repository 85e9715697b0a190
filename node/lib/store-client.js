// One way to send the module's commands through whichever client rate-limiter-flexible was given:
// ioredis (Redis or Cluster) or node-redis (client or cluster), each command to its key's node.
'use strict';

const { keyedCommand } = require('./ioredis');

const isIoredis = (client) => typeof client.defineCommand === 'function'
  && typeof client.sendCommand === 'function' && typeof client.multi === 'function';
const isNodeRedisCluster = (client) => 'masters' in client && typeof client.nodeClient === 'function';

/**
 * Wraps `client` as `{ send(key, isReadOnly, args), transaction(key, commands), isReady() }`.
 * `send` resolves the reply or rejects with the server's error; `transaction` runs the commands
 * (all on `key`, so one slot) in MULTI/EXEC, one round trip, and resolves each command's reply
 * or its Error in order. `useRedisPackage` forces node-redis, as rate-limiter-flexible's option
 * does.
 */
function storeConnection(client, { useRedisPackage = false } = {}) {
  if (!useRedisPackage && isIoredis(client)) return ioredisConnection(client);
  if (typeof client.sendCommand === 'function' && typeof client.multi === 'function') {
    return isNodeRedisCluster(client) ? nodeRedisClusterConnection(client) : nodeRedisConnection(client);
  }
  throw new TypeError(
    'ratelimit-node: storeClient must be an ioredis Redis or Cluster, or a node-redis (4 or later) client or cluster',
  );
}

function ioredisConnection(client) {
  return {
    send(key, _isReadOnly, [name, ...args]) {
      return client.sendCommand(keyedCommand(name, args, key));
    },
    async transaction(key, commands) {
      const multi = client.multi();
      for (const [name, ...args] of commands) multi.sendCommand(keyedCommand(name, args, key));
      const replies = await multi.exec();
      if (replies === null) throw new Error('ratelimit-node: the transaction was aborted');
      return replies.map(([error, reply]) => error ?? reply);
    },
    isReady: () => client.status === 'ready',
  };
}

/** node-redis rejects a whole EXEC when one command failed: its replies are still there. */
async function nodeRedisExec(multi) {
  try {
    return await multi.exec();
  } catch (error) {
    if (Array.isArray(error.replies)) return error.replies;
    throw error;
  }
}

function nodeRedisConnection(client) {
  return {
    send: (_key, _isReadOnly, args) => client.sendCommand(args),
    transaction(_key, commands) {
      const multi = client.multi();
      for (const args of commands) multi.addCommand(args);
      return nodeRedisExec(multi);
    },
    isReady: () => client.isReady === true,
  };
}

function nodeRedisClusterConnection(cluster) {
  return {
    send: (key, isReadOnly, args) => cluster.sendCommand(key, isReadOnly, args),
    transaction(key, commands) {
      const multi = cluster.multi(key);
      for (const args of commands) multi.addCommand(key, false, args);
      return nodeRedisExec(multi);
    },
    isReady: () => cluster.isReady === true,
  };
}

module.exports = { storeConnection };

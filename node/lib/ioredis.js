// Routes the stores' commands through ioredis (a Redis or a Cluster) straight to their key's node.
'use strict';

/**
 * ioredis finds a command's keys in its own command table, which has none of the module's
 * commands: a Cluster sends them to a random master, which answers MOVED, and reloads its
 * whole slot map each time. A command that names its key goes straight to the master of its
 * slot; on a single server it is an ordinary command.
 *
 * Returns a `sendCommandCluster` for RedisStore: `({ key, command }) => reply`.
 */
function ioredisSendCommand(client) {
  // ioredis is the caller's: this is only reached with one of its clients in hand.
  // eslint-disable-next-line global-require
  const { Command } = require('ioredis');
  class KeyedCommand extends Command {
    constructor(name, args, key) {
      super(name, args, { replyEncoding: 'utf8' }); // as client.call() replies
      this.routingKey = key;
    }

    getKeys() {
      return [this.routingKey];
    }
  }
  return ({ key, command }) => {
    const [name, ...args] = command;
    return client.sendCommand(new KeyedCommand(name, args, key));
  };
}

module.exports = { ioredisSendCommand };

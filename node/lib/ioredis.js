// Routes the packages' commands through ioredis (a Redis or a Cluster) straight to their key's node.
'use strict';

let KeyedCommand;

/**
 * A command that names its key for ioredis's slot routing. ioredis finds a command's keys in its
 * own command table, which has none of the module's commands: a Cluster sends them to a random
 * master, which answers MOVED, and reloads its whole slot map each time. A command that names
 * its key goes straight to the master of its slot; on a single server it is an ordinary command.
 * Replies are strings, as `client.call()` replies.
 */
function keyedCommand(name, args, key) {
  if (KeyedCommand === undefined) {
    // ioredis is the caller's: this is only reached with one of its clients in hand.
    // eslint-disable-next-line global-require
    const { Command } = require('ioredis');
    KeyedCommand = class extends Command {
      constructor(commandName, commandArgs, routingKey) {
        super(commandName, commandArgs, { replyEncoding: 'utf8' });
        this.routingKey = routingKey;
      }

      getKeys() {
        return [this.routingKey];
      }
    };
  }
  return new KeyedCommand(name, args, key);
}

/**
 * Returns a `sendCommandCluster` for RedisStore: `({ key, command }) => reply`, each command
 * sent to its key's node.
 */
function ioredisSendCommand(client) {
  return ({ key, command }) => {
    const [name, ...args] = command;
    return client.sendCommand(keyedCommand(name, args, key));
  };
}

module.exports = { ioredisSendCommand, keyedCommand };

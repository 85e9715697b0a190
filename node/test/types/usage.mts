// The package's types as an ES module user writes them (checked by tsc in types.test.js).
import express from 'express';
import { rateLimit, type Store } from 'express-rate-limit';
import { Redis, Cluster } from 'ioredis';
import { createClient, createCluster } from 'redis';
import DefaultStore, { RedisStore, ioredisSendCommand, type RedisReply } from 'ratelimit-node';

const client = createClient();
const io = new Redis();
const cluster = createCluster({ rootNodes: [] });

const stores: Store[] = [
  // rate-limit-redis's README examples, unchanged but for the import.
  new RedisStore({ sendCommand: (...args: string[]) => client.sendCommand(args) }),
  new RedisStore({
    sendCommand: (command: string, ...args: string[]) => io.call(command, ...args) as Promise<RedisReply>,
  }),
  new RedisStore({
    sendCommandCluster: ({ key, isReadOnly, command }) => cluster.sendCommand(key, isReadOnly, command),
    prefix: 'api:',
  }),
  new DefaultStore({ sendCommandCluster: ioredisSendCommand(new Cluster([])) }),
];

const app = express();
app.use(rateLimit({ windowMs: 60_000, limit: 10, store: stores[0] }));

// @ts-expect-error: one of sendCommand and sendCommandCluster, not both
new RedisStore({ sendCommand: async () => 1, sendCommandCluster: async () => 1 });
// @ts-expect-error: a client is required
new RedisStore({ prefix: 'x' });

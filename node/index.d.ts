// Types of ratelimit-node (hand-written: the package is plain JavaScript).
import type { Options, Store, IncrementResponse, ClientRateLimitInfo } from 'express-rate-limit';

/** A reply from Redis, as a client hands it over. */
export type RedisReply = unknown;

/** A command for a cluster client: `key` picks the node. */
export type SendCommandClusterDetails = {
  key: string;
  isReadOnly: boolean;
  command: string[];
};

/** Sends a raw command, e.g. `(...args) => client.sendCommand(args)` (node-redis). */
export type SendCommandFn = (...args: string[]) => Promise<RedisReply>;

/** Sends a raw command to the node that serves `key` (node-redis cluster, ioredisSendCommand). */
export type SendCommandClusterFn = (details: SendCommandClusterDetails) => Promise<RedisReply>;

type BaseOptions = {
  /** Prepended to every client key to name its limiter. Default `rl:`. */
  prefix?: string;
};

export type RedisStoreOptions =
  | (BaseOptions & { sendCommand: SendCommandFn; sendCommandCluster?: never })
  | (BaseOptions & { sendCommandCluster: SendCommandClusterFn; sendCommand?: never });

/** express-rate-limit's store on RATELIMIT.ALLOW: an exact sliding window. */
export declare class RedisStore implements Store {
  constructor(options: RedisStoreOptions);
  prefix: string;
  localKeys: false;
  /** `limit` must be a number: the sliding log takes the rate with the permit. */
  init(options: Options): void;
  increment(key: string): Promise<IncrementResponse>;
  decrement(key: string): Promise<void>;
  resetKey(key: string): Promise<void>;
  get(key: string): Promise<ClientRateLimitInfo | undefined>;
}

/** A `sendCommandCluster` for an ioredis `Redis` or `Cluster`: each command straight to its key's node. */
export declare function ioredisSendCommand(client: {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  sendCommand(command: any, ...rest: any[]): unknown;
}): SendCommandClusterFn;

export default RedisStore;

// Types of ratelimit-node/flexible (hand-written: the package is plain JavaScript): the
// library's own, with RateLimiterRedis on the ratelimit module.
import { RateLimiterStoreAbstract } from 'rate-limiter-flexible';

/** The options every rate-limiter-flexible store takes (points, duration, blockDuration, ...). */
type StoreOptions = ConstructorParameters<typeof RateLimiterStoreAbstract>[0];

export * from 'rate-limiter-flexible';

/** rate-limiter-flexible's RateLimiterRedis options, as this RateLimiterRedis takes them. */
export interface IRateLimiterRedisOptions extends StoreOptions {
    /** An ioredis `Redis` or `Cluster`, or a node-redis (4 or later) client or cluster. */
    storeClient: any;
    /** Reject (or ask insuranceLimiter) at once while the client is not connected. */
    rejectIfRedisNotReady?: boolean;
    /** Treat storeClient as node-redis. */
    useRedisPackage?: boolean;
    /** Not supported: node-redis 3 and lower (callbacks). The constructor throws if true. */
    useRedis3AndLowerPackage?: false;
    /** Not supported: there is no script. The constructor throws. */
    customIncrTtlLuaScript?: never;
}

/** rate-limiter-flexible's RateLimiterRedis on the ratelimit module's one-key sliding log. */
export declare class RateLimiterRedis extends RateLimiterStoreAbstract {
    constructor(opts: IRateLimiterRedisOptions);
}

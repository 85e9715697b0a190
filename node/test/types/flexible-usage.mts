// ratelimit-node/flexible's types as an ES module user writes them (checked by tsc in
// package.test.js): rate-limiter-flexible's README code, unchanged but for the import path.
import { Redis, Cluster } from 'ioredis';
import { createClient, createCluster } from 'redis';
import {
  RateLimiterRedis, RateLimiterMemory, RateLimiterRes, RateLimiterUnion, type IRateLimiterRedisOptions,
} from 'ratelimit-node/flexible';

const opts: IRateLimiterRedisOptions = {
  storeClient: new Redis(),
  keyPrefix: 'middleware',
  points: 10,
  duration: 1,
  blockDuration: 60,
  execEvenly: false,
  inMemoryBlockOnConsumed: 11,
  inMemoryBlockDuration: 60,
  insuranceLimiter: new RateLimiterMemory({ points: 10, duration: 1 }),
  rejectIfRedisNotReady: true,
};
const limiter = new RateLimiterRedis(opts);
new RateLimiterRedis({ storeClient: createClient(), points: 5, duration: 60, useRedisPackage: true });
new RateLimiterRedis({ storeClient: new Cluster([]), points: 5, duration: 60 });
new RateLimiterRedis({ storeClient: createCluster({ rootNodes: [] }), points: 5, duration: 60 });
new RateLimiterUnion(limiter, new RateLimiterMemory({ keyPrefix: 'm', points: 1, duration: 1 }));

async function handle(ip: string): Promise<number> {
  try {
    const res: RateLimiterRes = await limiter.consume(ip, 2);
    await limiter.penalty(ip, 1);
    await limiter.reward(ip, 1);
    await limiter.block(ip, 10);
    const seen: RateLimiterRes | null = await limiter.get(ip);
    const deleted: boolean = await limiter.delete(ip);
    return res.remainingPoints + (seen?.consumedPoints ?? 0) + Number(deleted);
  } catch (rejRes) {
    if (rejRes instanceof Error) throw rejRes;
    return Math.round((rejRes as RateLimiterRes).msBeforeNext / 1000) || 1;
  }
}
export { handle };

// @ts-expect-error: there is no script to replace
new RateLimiterRedis({ storeClient: new Redis(), points: 1, duration: 1, customIncrTtlLuaScript: 'return 1' });

// ratelimit-node/flexible as an ES module: the same classes as flexible.js (one implementation).
import cjs from './flexible.js';

export const {
  RateLimiterRedis,
  RateLimiterRedisNonAtomic,
  RateLimiterMongo,
  RateLimiterMySQL,
  RateLimiterPostgres,
  RateLimiterMemory,
  RateLimiterMemcache,
  RateLimiterClusterMaster,
  RateLimiterClusterMasterPM2,
  RateLimiterCluster,
  RLWrapperBlackAndWhite,
  RLWrapperTimeouts,
  RateLimiterUnion,
  RateLimiterQueue,
  BurstyRateLimiter,
  RateLimiterRes,
  RateLimiterCompatibleAbstract,
  RateLimiterDynamo,
  RateLimiterPrisma,
  RateLimiterValkey,
  RateLimiterValkeyGlide,
  RateLimiterSQLite,
  RateLimiterEtcd,
  RateLimiterDrizzle,
  RateLimiterDrizzleNonAtomic,
  RateLimiterEtcdNonAtomic,
  RateLimiterQueueError,
  RateLimiterEtcdTransactionFailedError,
} = cjs;
export default cjs;

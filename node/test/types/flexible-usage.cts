// ratelimit-node/flexible's types from CommonJS (checked by tsc in package.test.js).
import flexible = require('ratelimit-node/flexible');

const limiter = new flexible.RateLimiterRedis({ storeClient: {}, points: 1, duration: 1 });
const memory: flexible.RateLimiterMemory = new flexible.RateLimiterMemory({ points: 1, duration: 1 });
export { limiter, memory };

// ratelimit-node as an ES module: the same classes as index.js (one implementation).
import cjs from './index.js';

export const { RedisStore, ioredisSendCommand } = cjs;
export default cjs.RedisStore;

// Types of ratelimit-node as an ES module (index.mjs): the same declarations, RedisStore as default.
import { RedisStore } from './index.js';

export * from './index.js';
export default RedisStore;

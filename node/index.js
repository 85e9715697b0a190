// ratelimit-node: express-rate-limit's Redis store on the ratelimit module's sliding log.
'use strict';

const { RedisStore } = require('./lib/express-store');
const { ioredisSendCommand } = require('./lib/ioredis');

exports.RedisStore = RedisStore;
exports.ioredisSendCommand = ioredisSendCommand;
exports.default = RedisStore;
// Marks the default export for TypeScript's and Babel's CommonJS interop (esModuleInterop):
// without it, `import RedisStore from 'ratelimit-node'` compiled to CommonJS gets this whole
// exports object, not the class, as rate-limit-redis's own CommonJS build does not.
Object.defineProperty(exports, '__esModule', { value: true });

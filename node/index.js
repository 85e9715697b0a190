// ratelimit-node: express-rate-limit's Redis store on the ratelimit module's sliding log.
'use strict';

const { RedisStore } = require('./lib/express-store');
const { ioredisSendCommand } = require('./lib/ioredis');

exports.RedisStore = RedisStore;
exports.ioredisSendCommand = ioredisSendCommand;
exports.default = RedisStore;

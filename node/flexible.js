// ratelimit-node/flexible: rate-limiter-flexible with its RateLimiterRedis served by the ratelimit
// module's one-key sliding log. Everything else is the library's own, so that the switch is
// the import path alone.
'use strict';

const upstream = require('rate-limiter-flexible');
const { RateLimiterRedis } = require('./lib/flexible');

module.exports = { ...upstream, RateLimiterRedis };

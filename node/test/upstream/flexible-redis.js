// What the upstream suite's `require('../lib/RateLimiterRedis')` gets: this package's drop-in.
'use strict';

module.exports = require('../../flexible').RateLimiterRedis;

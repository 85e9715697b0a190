// The names of a limiter's keys: the module's naming rule (docs/keyspace.md), one place.
'use strict';

/**
 * The key of a limiter's state (`value` or `permits`): appended to the name as it is when the
 * name already holds a `{`, else appended to the name wrapped in braces, so that every key of a
 * limiter hashes to the limiter's own slot in Redis Cluster.
 */
function stateKey(name, suffix) {
  return name.includes('{') ? `${name}:${suffix}` : `{${name}}:${suffix}`;
}

module.exports = { stateKey };

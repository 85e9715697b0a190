// Reads the module's field replies (ALLOW's) from any client and protocol, as numbers.
'use strict';

/**
 * ALLOW replies a flat array of name, value pairs over RESP2 (ioredis, node-redis' default) and
 * a map over RESP3 (a `Map` or a plain object, depending on the client's type mapping). Names
 * may come back as strings or Buffers, integers as numbers or strings.
 */
function fields(reply) {
  const out = {};
  const put = (name, value) => {
    out[String(name)] = typeof value === 'number' ? value : Number(String(value));
  };
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) put(reply[i], reply[i + 1]);
  } else if (reply instanceof Map) {
    for (const [name, value] of reply) put(name, value);
  } else if (reply !== null && typeof reply === 'object') {
    for (const [name, value] of Object.entries(reply)) put(name, value);
  } else {
    throw new TypeError(`ratelimit-node: unexpected reply from Redis: ${String(reply)}`);
  }
  for (const name of ['allowed', 'limit', 'remaining', 'retry_after', 'reset_after']) {
    if (!Number.isFinite(out[name])) {
      throw new TypeError(`ratelimit-node: the reply lacks ${name}: is the ratelimit module loaded?`);
    }
  }
  return out;
}

module.exports = { fields };

// express-rate-limit's Store on the module's exact sliding log: one RATELIMIT.ALLOW per request.
'use strict';

const { createHash } = require('node:crypto');
const { stateKey } = require('./keys');
const { fields } = require('./reply');

/** The module's bounds on a rate and an interval (docs/commands/setrate.md). */
const MAX_RATE = 4294967295;
const MAX_INTERVAL = 3153600000000;

/**
 * `get` reads a limiter in one atomic call: its configuration, what AVAILABLE says (computed, not
 * written), the newest log entry (when the whole rate is free again) and the server's clock the
 * log is scored with. A missing limiter replies nil.
 */
const GET_SCRIPT = [
  "local conf = redis.call('HMGET', KEYS[1], 'rate', 'interval')",
  'if not conf[1] or not conf[2] then return false end',
  "local available = redis.call('RATELIMIT.AVAILABLE', KEYS[1])",
  "local newest = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')",
  "local now = redis.call('TIME')",
  "return {conf[1], conf[2], available, newest[2] or '', now[1], now[2]}",
].join('\n');
const GET_SCRIPT_SHA = createHash('sha1').update(GET_SCRIPT).digest('hex');

const isNotInitialized = (error) =>
  error instanceof Error && error.message.includes('RateLimiter is not initialized');
const isNoScript = (error) => error instanceof Error && /^NOSCRIPT(?:\s|$)/.test(error.message);

class RedisStore {
  /**
   * @param {object} options `sendCommand(...args)` for a single server (or a client that routes
   *   by itself), or `sendCommandCluster({ key, isReadOnly, command })` for a cluster client,
   *   not both; `prefix` (default `rl:`) is prepended to every client key.
   */
  constructor(options) {
    if (typeof options !== 'object' || options === null) {
      throw new TypeError('ratelimit-node: Error: options object is required');
    }
    if ('resetExpiryOnChange' in options) {
      throw new TypeError(
        'ratelimit-node: Error: resetExpiryOnChange has no meaning on a sliding window (every ' +
          'request leaves the window one windowMs after it was taken)',
      );
    }
    const hasSend = 'sendCommand' in options;
    const hasCluster = 'sendCommandCluster' in options;
    if (hasSend && !hasCluster) {
      const sendCommandFn = options.sendCommand.bind(this);
      this.sendCommand = async ({ command }) => sendCommandFn(...command);
    } else if (!hasSend && hasCluster) {
      this.sendCommand = options.sendCommandCluster.bind(this);
    } else {
      throw new Error(
        'ratelimit-node: Error: options must include either sendCommand or sendCommandCluster (but not both)',
      );
    }
    /** The text prepended to every client key: the limiter's name is `prefix + key`. */
    this.prefix = options.prefix ?? 'rl:';
    /** The limiters live in Redis, shared by every process using the same prefix. */
    this.localKeys = false;
    /** Refused hits not yet handed back by express-rate-limit's `decrement`, per key. */
    this.refusedPending = new Map();
  }

  /**
   * Takes express-rate-limit's options: `limit` and `windowMs` become the limiter's rate and
   * interval. The sliding log needs the rate when it takes a permit, so `limit` must be a number.
   */
  init(options) {
    const { limit, windowMs } = options;
    if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_RATE) {
      throw new TypeError(
        `ratelimit-node: Error: limit must be an integer between 1 and ${MAX_RATE} ` +
          `(a function cannot be used: the rate is taken with the permit), got ${String(limit)}`,
      );
    }
    if (!Number.isInteger(windowMs) || windowMs < 1 || windowMs > MAX_INTERVAL) {
      throw new TypeError(
        `ratelimit-node: Error: windowMs must be an integer between 1 and ${MAX_INTERVAL}, got ${String(windowMs)}`,
      );
    }
    this.limit = limit;
    this.windowMs = windowMs;
    // KEEPALIVE = the window: a limiter idle for a whole window has nothing left to remember,
    // and its keys expire by themselves.
    this.rateArgs = ['RATE', String(limit), String(windowMs), 'KEEPALIVE', String(windowMs)];
    // Only with skipFailedRequests is a refused hit (a 429, a failed request) handed back to
    // decrement; it took no permit, so that decrement must give nothing back.
    this.tracksRefusals = Boolean(options.skipFailedRequests);
  }

  prefixKey(key) {
    return `${this.prefix}${key}`;
  }

  send(key, isReadOnly, command) {
    return this.sendCommand({ key, isReadOnly, command });
  }

  requireInit() {
    if (this.rateArgs === undefined) {
      throw new Error('ratelimit-node: Error: the store was not initialized (init was not called or failed)');
    }
  }

  /**
   * One request: takes a permit from the sliding log if one is free. `totalHits` is the permits
   * in the window with this one when it was taken, and `limit + 1` when it was refused (a refused
   * request takes nothing); `resetTime` is when the whole limit is free again, or for a refused
   * request when it could be taken (so Retry-After is exact).
   */
  async increment(key) {
    this.requireInit();
    const name = this.prefixKey(key);
    const r = fields(await this.send(name, false, ['RATELIMIT.ALLOW', name, '1', ...this.rateArgs]));
    if (!r.allowed) {
      if (this.tracksRefusals) this.refusedPending.set(key, (this.refusedPending.get(key) ?? 0) + 1);
      return { totalHits: this.limit + 1, resetTime: new Date(Date.now() + r.retry_after) };
    }
    // A limiter created with another rate keeps it until it expires (resetKey deletes it):
    // what is in the window is read against the limit express-rate-limit compares with.
    const totalHits = Math.min(Math.max(this.limit - r.remaining, 1), this.limit);
    return { totalHits, resetTime: new Date(Date.now() + r.reset_after) };
  }

  /**
   * Gives a request's permit back (skipFailedRequests, skipSuccessfulRequests). A refused
   * request took none, so its decrement gives nothing back. RELEASE removes the newest permit of
   * the window, not necessarily this request's.
   */
  async decrement(key) {
    const pending = this.refusedPending.get(key);
    if (pending !== undefined) {
      if (pending <= 1) this.refusedPending.delete(key);
      else this.refusedPending.set(key, pending - 1);
      return;
    }
    const name = this.prefixKey(key);
    try {
      await this.send(name, false, ['RATELIMIT.RELEASE', name, '1']);
    } catch (error) {
      // The limiter expired meanwhile: nothing is logged, nothing to give back.
      if (!isNotInitialized(error)) throw error;
    }
  }

  /** Forgets a client: deletes its limiter, so its next request starts a fresh window. */
  async resetKey(key) {
    const name = this.prefixKey(key);
    this.refusedPending.delete(key);
    await this.send(name, false, ['RATELIMIT.DELETE', name]);
  }

  /**
   * A client's hits in the window now and when the whole limit is free again, in one atomic
   * call that writes nothing; undefined when the client has no limiter.
   */
  async get(key) {
    const name = this.prefixKey(key);
    const keys = ['2', name, stateKey(name, 'permits')];
    let reply;
    try {
      reply = await this.send(name, true, ['EVALSHA', GET_SCRIPT_SHA, ...keys]);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      reply = await this.send(name, true, ['EVAL', GET_SCRIPT, ...keys]);
    }
    if (reply === null || reply === undefined) return undefined;
    if (!Array.isArray(reply) || reply.length !== 6) {
      throw new TypeError('ratelimit-node: unexpected reply from Redis');
    }
    const [rate, interval, available, newest, seconds, micros] = reply.map((v) => String(v));
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const resetAfter = newest === '' ? 0 : Math.max(0, Number(newest) + Number(interval) - now);
    return {
      totalHits: Number(rate) - Number(available),
      resetTime: new Date(Date.now() + resetAfter),
    };
  }
}

module.exports = { RedisStore, GET_SCRIPT };

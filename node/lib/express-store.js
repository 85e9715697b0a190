// express-rate-limit's Store on the module's sliding log in one key: one RATELIMIT.ALLOW per
// request.
'use strict';

const { fields } = require('./reply');

/** The module's bounds on a rate and an interval (docs/commands/setrate.md). */
const MAX_RATE = 4294967295;
const MAX_INTERVAL = 3153600000000;

const isNotInitialized = (error) =>
  error instanceof Error && error.message.includes('RateLimiter is not initialized');

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
    // ONEKEY: the limiter's whole state in one string key under its name (no Redisson client
    // shares express-rate-limit's limiters), at the module's default precision: a hit leaves
    // the window at most windowMs / 60 late, never early, and the key holds at most 61 entries
    // whatever the limit. KEEPALIVE = the window: a limiter idle for a whole window has nothing
    // left to remember, and its key expires by itself.
    this.rateArgs = ['RATE', String(limit), String(windowMs), 'ONEKEY', 'KEEPALIVE', String(windowMs)];
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
   * A client's hits in the window now and when the whole limit is free again: one
   * RATELIMIT.PEEK for 0 permits (the limiter as it stands, asking for nothing), read-only and
   * atomic; undefined when the client has no limiter.
   */
  async get(key) {
    const name = this.prefixKey(key);
    let reply;
    try {
      reply = await this.send(name, true, ['RATELIMIT.PEEK', name, '0']);
    } catch (error) {
      if (isNotInitialized(error)) return undefined;
      throw error;
    }
    const r = fields(reply);
    return {
      totalHits: r.limit - r.remaining,
      resetTime: new Date(Date.now() + r.reset_after),
    };
  }
}

module.exports = { RedisStore };

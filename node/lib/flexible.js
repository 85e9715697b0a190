// rate-limiter-flexible's RateLimiterRedis on the module's one-key sliding log: one key per
// limiter and user, consume one RATELIMIT.ALLOW, get one RATELIMIT.PEEK.
'use strict';

// rate-limiter-flexible is a peer dependency: its users already have it, and this class is one
// of its stores. Extending its store base keeps everything the library does above the store
// (RateLimiterRes, rejections, blockDuration, execEvenly, the in-memory block, insuranceLimiter,
// instanceof checks in RateLimiterUnion, RateLimiterQueue, BurstyRateLimiter) the library's own;
// this class only says how a key is read and written. The base is not exported by name: it is
// the prototype of the library's own RateLimiterRedis.
const { RateLimiterRedis: UpstreamRedis, RateLimiterRes } = require('rate-limiter-flexible');
const { fields } = require('./reply');
const { storeConnection } = require('./store-client');

const StoreAbstract = Object.getPrototypeOf(UpstreamRedis);

/** The module's bounds on a rate and an interval (docs/commands/setrate.md). */
const MAX_RATE = 4294967295;
const MAX_INTERVAL = 3153600000000;
/** A ONEKEY log holds at most this many entries (docs/onekey.md). */
const MAX_ENTRIES = 4096;
/** Limits up to this many points are logged exactly (see rateArgs). */
const EXACT_UP_TO = 60;
/**
 * What never expires in rate-limiter-flexible (duration 0, block for 0 seconds) is a window of
 * the module's longest interval, 100 years; a time beyond 50 years is reported as the library
 * reports a key without a TTL: -1.
 */
const NEVER_AFTER_MS = MAX_INTERVAL / 2;

const isNotInitialized = (error) =>
  error instanceof Error && error.message.includes('RateLimiter is not initialized');
const exceedsRate = (error) =>
  error instanceof Error && error.message.includes('cannot exceed defined rate');

function optionError(message) {
  return new Error(`ratelimit-node/flexible: ${message}`);
}

/** Milliseconds the module takes as an interval (0 means forever), from the library's `ms`. */
function windowMs(ms, name) {
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0 || ms > MAX_INTERVAL) {
    throw optionError(`${name} must be 0 or a number of seconds that is a whole number of ` +
      `milliseconds, up to ${MAX_INTERVAL / 1000}, got ${String(ms / 1000)}`);
  }
  return ms;
}

/**
 * Points as rate-limiter-flexible's Redis store takes them: an integer, or a string of digits,
 * refused with the library's own messages (its suite and its users match on them).
 */
function pointsOf(points) {
  if (typeof points === 'string') {
    if (!/^[1-9][0-9]*$/.test(points)) {
      throw new Error('Consuming string different than integer values is not supported by this package');
    }
    return Number(points);
  }
  if (!Number.isInteger(points)) {
    throw new Error('Consuming decimal number of points is not supported by this package');
  }
  if (points < 0) {
    throw new Error(`ratelimit-node/flexible: points must not be negative, got ${points} (reward() gives points back)`);
  }
  return points;
}

/**
 * The `RATE ...` arguments of a limiter of `points` per `ms` (0: forever), in one key that
 * expires once idle for a window. A log holds at most one entry per permit, so up to 60 points
 * it is exact (PRECISION 1) at no more entries than the module's default precision (a sixtieth
 * of the window) allows, which larger limits keep: their permits free at most a sixtieth of the
 * window late, never early.
 */
function rateArgs(points, ms) {
  const args = ['RATE', String(points), String(ms > 0 ? ms : MAX_INTERVAL), 'ONEKEY'];
  if (ms > 0) args.push('KEEPALIVE', String(ms));
  if (points <= EXACT_UP_TO) args.push('PRECISION', '1');
  return args;
}

/**
 * The commands that make `rlKey` hold `n` consumed points for `ms` (0: forever), whatever it
 * held: a limiter of `rate` (at least `n`) per `ms`, `n` of them taken, logged exactly where the
 * log's 4 096 entries allow it, and the key expiring with the hold. Without a keep-alive, no
 * call moves that expiry, and the key is expired by the millisecond its log frees (a TTL of
 * `ms - 1` expires the key once the clock passes it), so the hold never grants: the next call
 * after it finds no key and starts a window of its own.
 */
function holdCommands(rlKey, n, rate, ms) {
  const interval = ms > 0 ? Math.max(ms, 2) : MAX_INTERVAL;
  const exact = rate <= MAX_ENTRIES || interval <= MAX_ENTRIES;
  const commands = [
    ['RATELIMIT.DELETE', rlKey],
    ['RATELIMIT.SETRATE', rlKey, String(rate), String(interval), 'ONEKEY',
      'PRECISION', exact ? '1' : String(Math.ceil(interval / MAX_ENTRIES))],
  ];
  if (n > 0) commands.push(['RATELIMIT.TRYACQUIRE', rlKey, String(n)]);
  if (ms > 0) commands.push(['PEXPIRE', rlKey, String(Math.max(ms - 1, 1))]);
  return commands;
}


/**
 * Whether `client` can take a command for `rlKey` now, decided by rate-limiter-flexible's own
 * RateLimiterRedis (its readiness rule for `rejectIfRedisNotReady`, which reads each kind of
 * client's state), so a client is refused exactly when the library would refuse it.
 */
function clientIsReady(client, rlKey, isReadOnly) {
  // Every 11.x has it; a library without it has no such option to honour.
  if (typeof UpstreamRedis.prototype._isRedisReady !== 'function') return true;
  return UpstreamRedis.prototype._isRedisReady.call(
    { client, _rejectIfRedisNotReady: true },
    rlKey,
    isReadOnly,
  );
}

class RateLimiterRedis extends StoreAbstract {
  /**
   * rate-limiter-flexible's RateLimiterRedis options. `storeClient` is an ioredis Redis or
   * Cluster, or a node-redis client or cluster. Options that cannot be served on a sliding log
   * throw here, naming the option and why.
   */
  constructor(opts) {
    if (typeof opts !== 'object' || opts === null) {
      throw optionError('an options object is required');
    }
    const { points, duration, blockDuration = 0 } = opts;
    if (!Number.isInteger(points) || points < 0 || points > MAX_RATE) {
      throw optionError(`points must be an integer between 0 and ${MAX_RATE} (the sliding log's ` +
        `rate; 0 refuses every consume), got ${String(points)}`);
    }
    if (opts.useRedis3AndLowerPackage) {
      throw optionError('useRedis3AndLowerPackage: node-redis 3 and lower (callbacks) is not ' +
        'supported; use node-redis 4 or later, or ioredis');
    }
    if (opts.customIncrTtlLuaScript !== undefined) {
      throw optionError('customIncrTtlLuaScript: there is no script to replace (each call is one ' +
        'module command)');
    }
    for (const name of ['blockOnConsumed', 'inMemoryBlockOnConsumed']) {
      if (opts[name] > points + 1) {
        throw optionError(`${name} above points + 1 cannot be reached: a refused consume takes ` +
          'nothing from the sliding log, so refusals do not add up');
      }
    }
    if (opts.storeClient === undefined || opts.storeClient === null) {
      throw optionError('storeClient is not set');
    }
    if (typeof duration !== 'number') {
      throw optionError(`duration must be set: the window in seconds (0: forever), got ${String(duration)}`);
    }
    windowMs(duration * 1000, 'duration');
    windowMs(blockDuration * 1000, 'blockDuration');
    super(opts);
    this.client = opts.storeClient;
    this._useRedisPackage = Boolean(opts.useRedisPackage);
    this._rejectIfRedisNotReady = Boolean(opts.rejectIfRedisNotReady);
  }

  /**
   * How commands reach the client, made at the first command, as the library touches its client
   * only then: a client of a kind this package cannot drive fails the first call, and a client
   * `rejectIfRedisNotReady` finds not ready is refused before that.
   */
  get _connection() {
    if (this._storeConnection === undefined) {
      this._storeConnection = storeConnection(this.client, { useRedisPackage: this._useRedisPackage });
    }
    return this._storeConnection;
  }

  /** With `rejectIfRedisNotReady`, a call on a client that is not ready fails at once. */
  _requireReady(rlKey, isReadOnly) {
    if (this._rejectIfRedisNotReady && !clientIsReady(this.client, rlKey, isReadOnly)) {
      throw new Error('Redis connection is not ready');
    }
  }

  /** `RATELIMIT.PEEK key 0`: the limiter as it stands, or null when it does not exist. */
  async _peek(rlKey) {
    try {
      return fields(await this._connection.send(rlKey, true, ['RATELIMIT.PEEK', rlKey, '0']));
    } catch (error) {
      if (isNotInitialized(error)) return null;
      throw error;
    }
  }

  /**
   * One RATELIMIT.ALLOW of `n` permits, creating the limiter if absent. Asking for more than the
   * limiter's rate can never be granted: it is read (PEEK) and answered as a refusal.
   */
  async _allow(rlKey, n, ms) {
    const command = ['RATELIMIT.ALLOW', rlKey, String(n), ...rateArgs(this.points, ms)];
    try {
      return fields(await this._connection.send(rlKey, false, command));
    } catch (error) {
      if (!exceedsRate(error)) throw error;
    }
    const now = await this._peek(rlKey);
    const r = now ?? { limit: this.points, remaining: this.points, reset_after: 0 };
    return { ...r, allowed: 0, retry_after: r.reset_after };
  }

  /**
   * A limiter of no points refuses every consume and logs nothing (no limiter has a rate of 0):
   * a hold set on the key still reads back; otherwise the wait is a window, as the library's
   * counter, made by the refused call, would report.
   */
  async _refuseAll(rlKey, ms) {
    const now = await this._peek(rlKey);
    const wait = ms > 0 ? ms : NEVER_AFTER_MS + 1;
    if (now === null) return { allowed: 0, limit: 0, remaining: 0, retry_after: wait, reset_after: wait };
    return { ...now, allowed: 0, retry_after: now.reset_after };
  }

  /**
   * The store's write, as rate-limiter-flexible's base calls it: `forceExpire` false takes
   * points (consume); true makes the key hold `points` consumed for `msDuration` (block, set).
   */
  async _upsert(rlKey, points, msDuration, forceExpire = false) {
    const n = pointsOf(points);
    this._requireReady(rlKey, false);
    const ms = windowMs(msDuration, forceExpire ? 'the block' : 'customDuration');
    if (forceExpire) return this._hold(rlKey, n, ms);
    if (n === 0) {
      return (await this._peek(rlKey))
        ?? { allowed: 1, limit: this.points, remaining: this.points, retry_after: 0, reset_after: 0 };
    }
    if (this.points === 0) return this._refuseAll(rlKey, ms);
    return this._allow(rlKey, n, ms);
  }

  /**
   * Makes `rlKey` hold `n` consumed points for `ms` (0: forever): a block (`n` above points)
   * refuses every consume until it expires and reads back as `n` consumed; `set` with `n` up to
   * points leaves the rest to take until it expires. One transaction, one round trip.
   */
  async _hold(rlKey, n, ms) {
    const commands = holdCommands(rlKey, n, Math.max(n, this.points, 1), ms);
    const replies = await this._connection.transaction(rlKey, commands);
    const failed = replies.find((reply) => reply instanceof Error);
    if (failed) throw failed;
    return replies;
  }

  /**
   * A reply as RateLimiterRes. Consumed points are the permits in the window; a refused call
   * takes nothing, so it reports the window's permits plus what it asked for (what a fixed
   * window would count after it), always above `points`.
   */
  _getRateLimiterRes(rlKey, changedPoints, r) {
    const inWindow = Math.max(r.limit - r.remaining, 0);
    let consumed;
    let ms;
    if (r.allowed) {
      // A limiter of another rate (a block given points back by reward, another deployment's
      // points) may grant above points: the base then refuses the call, as the library's
      // counter refuses once it passes points, and that call's point stays taken, as there.
      consumed = inWindow;
      ms = r.reset_after;
    } else {
      consumed = Math.max(inWindow + changedPoints, this.points + 1);
      ms = r.retry_after;
    }
    return new RateLimiterRes(
      Math.max(this.points - consumed, 0),
      ms > NEVER_AFTER_MS ? -1 : ms,
      consumed,
      consumed === changedPoints,
    );
  }

  async _get(rlKey) {
    this._requireReady(rlKey, true);
    return this._peek(rlKey);
  }

  async _delete(rlKey) {
    return Number(await this._connection.send(rlKey, false, ['RATELIMIT.DELETE', rlKey])) > 0;
  }

  /**
   * Adds `points` consumed without refusing. The log holds at most `points` of the limiter, so
   * what does not fit is reported, not kept: it takes what is free (a second ALLOW when the
   * first asked for more than was free) and reports the window's permits before plus `points`.
   */
  async _penalty(key, points = 1, options = {}) {
    const rlKey = this.getKey(key);
    const n = pointsOf(points);
    this._requireReady(rlKey, false);
    const ms = windowMs(this._getKeySecDuration(options) * 1000, 'customDuration');
    let want = Math.min(n, this.points);
    let taken = 0;
    let r = null;
    for (let attempt = 0; attempt < 3 && want > 0; attempt += 1) {
      // eslint-disable-next-line no-await-in-loop
      r = await this._allow(rlKey, want, ms);
      if (r.allowed) {
        taken = want;
        break;
      }
      want = Math.min(want, r.remaining);
    }
    if (r === null) r = await this._peek(rlKey);
    if (r === null) return new RateLimiterRes(Math.max(this.points - n, 0), 0, n, true);
    const before = Math.max(r.limit - r.remaining, 0) - taken;
    const consumed = before + n;
    return new RateLimiterRes(
      Math.max(this.points - consumed, 0),
      r.reset_after > NEVER_AFTER_MS ? -1 : r.reset_after,
      consumed,
      consumed === n,
    );
  }

  /**
   * Gives back up to `points` of the newest permits in the window (RATELIMIT.RELEASE) and reads
   * the window, in one transaction. Nothing below an empty window: there is no credit.
   */
  async _reward(key, points = 1) {
    const rlKey = this.getKey(key);
    const n = pointsOf(points);
    this._requireReady(rlKey, false);
    const commands = [['RATELIMIT.PEEK', rlKey, '0']];
    if (n > 0) commands.unshift(['RATELIMIT.RELEASE', rlKey, String(n)]);
    const replies = await this._connection.transaction(rlKey, commands);
    const failed = replies.find((reply) => reply instanceof Error);
    if (failed !== undefined) {
      if (isNotInitialized(failed)) return new RateLimiterRes(this.points, 0, 0, false);
      throw failed;
    }
    return this._getRateLimiterRes(rlKey, -n, fields(replies[replies.length - 1]));
  }
}

module.exports = { RateLimiterRedis, RateLimiterRes };

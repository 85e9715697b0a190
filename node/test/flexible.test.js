// ratelimit-node/flexible's RateLimiterRedis against a real server with the module, each call
// refereed by rate-limiter-flexible's own RateLimiterRedis on the same server (its own key
// prefix): the same results field by field, but for the differences node/README.md lists.
// Our limiter runs on the module's frozen debug clock, so its times are exact; the referee's
// are Redis TTLs on the real clock, bounded by the milliseconds the test has taken.
'use strict';

const { describe, it, before, after, beforeEach } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { createClient, createCluster } = require('redis');
const upstream = require('rate-limiter-flexible');
const { RateLimiterRedis } = require('../flexible');
const { startServer, startCluster, T0 } = require('./servers');

const FOREVER = 3153600000000;

/** A call's outcome as a plain value: resolved or rejected, with its RateLimiterRes or Error. */
async function settle(promise) {
  try {
    const res = await promise;
    return { resolved: true, res };
  } catch (error) {
    return { resolved: false, res: error };
  }
}

const fieldsOf = (res) => (res instanceof upstream.RateLimiterRes ? res.toJSON() : res);

describe('RateLimiterRedis (rate-limiter-flexible) on the one-key sliding log', () => {
  let server;
  let ioredis;
  let nodeRedis;
  let started;
  const clients = {};

  before(async () => {
    server = await startServer();
    ioredis = new Redis({ port: server.port, host: '127.0.0.1' });
    nodeRedis = createClient({ socket: { port: server.port, host: '127.0.0.1' } });
    await nodeRedis.connect();
    clients.ioredis = ioredis;
    clients['node-redis'] = nodeRedis;
  });

  after(async () => {
    ioredis.disconnect();
    await nodeRedis.quit();
    await server.stop();
  });

  beforeEach(async () => {
    await server.admin.flushall();
    await server.admin.call('RATELIMIT.DEBUG', 'SETCLOCK', String(T0));
    started = Date.now();
  });

  const advance = (ms) => server.admin.call('RATELIMIT.DEBUG', 'ADVANCE', String(ms));

  /** Ours and the referee with the same options, each under its own key prefix. */
  function pair(client, opts) {
    const storeClient = clients[client];
    return {
      ours: new RateLimiterRedis({ ...opts, storeClient, keyPrefix: 'ours' }),
      // rate-limiter-flexible recognises node-redis 4 and later only when told.
      ref: new upstream.RateLimiterRedis({
        ...opts, storeClient, keyPrefix: 'ref', useRedisPackage: client === 'node-redis',
      }),
    };
  }

  /**
   * Runs `call` on both and compares: same outcome, same fields, our msBeforeNext exactly `ms`
   * (the referee's at most `ms` and at least `ms` less the time the test has run, or -1 alike);
   * `differ` names the fields that differ, as `{ field: [ours, referee] }`, and `resolved`
   * likewise when the outcomes differ.
   */
  async function compare(limiters, call, { ms, differ = {} } = {}) {
    const ours = await settle(call(limiters.ours));
    const ref = await settle(call(limiters.ref));
    const o = fieldsOf(ours.res);
    const r = fieldsOf(ref.res);
    if (differ.resolved) {
      assert.deepEqual([ours.resolved, ref.resolved], differ.resolved, 'resolved');
    } else {
      assert.equal(ours.resolved, ref.resolved, `ours ${JSON.stringify(o)}, referee ${JSON.stringify(r)}`);
    }
    if (ours.res instanceof Error) {
      assert.ok(ref.res instanceof Error, `referee ${JSON.stringify(r)}`);
      return ours;
    }
    if (o === null || typeof o !== 'object' || !('msBeforeNext' in o)) {
      assert.deepEqual(o, r);
      return ours;
    }
    assert.ok(ours.res instanceof upstream.RateLimiterRes, 'ours is the library’s RateLimiterRes');
    assert.ok(ref.res instanceof upstream.RateLimiterRes);
    for (const field of ['remainingPoints', 'consumedPoints', 'isFirstInDuration']) {
      if (field in differ) assert.deepEqual([o[field], r[field]], differ[field], field);
      else assert.equal(o[field], r[field], `${field}: ours ${JSON.stringify(o)}, referee ${JSON.stringify(r)}`);
    }
    if ('msBeforeNext' in differ) {
      assert.equal(o.msBeforeNext, differ.msBeforeNext[0], 'msBeforeNext');
    } else if (ms !== undefined) {
      assert.equal(o.msBeforeNext, ms, 'our msBeforeNext');
      if (ms === -1) {
        assert.equal(r.msBeforeNext, -1);
      } else {
        const elapsed = Date.now() - started + 1;
        assert.ok(r.msBeforeNext <= ms && r.msBeforeNext >= ms - elapsed,
          `referee msBeforeNext ${r.msBeforeNext} not within [${ms - elapsed}, ${ms}]`);
      }
    }
    return ours;
  }

  for (const client of ['ioredis', 'node-redis']) {
    it(`consume resolves, then rejects with a RateLimiterRes; get and delete (${client})`, async () => {
      const l = pair(client, { points: 3, duration: 60 });
      const first = await compare(l, (x) => x.consume('alice'), { ms: 60000 });
      assert.deepEqual(fieldsOf(first.res), { remainingPoints: 2, msBeforeNext: 60000, consumedPoints: 1, isFirstInDuration: true });
      await compare(l, (x) => x.consume('alice'), { ms: 60000 });
      await compare(l, (x) => x.consume('alice', 1), { ms: 60000 });
      await compare(l, (x) => x.get('alice'), { ms: 60000 });
      // The 4th call is refused by both with the same RateLimiterRes: 4 consumed, 0 remaining.
      const refused = await compare(l, (x) => x.consume('alice'), { ms: 60000 });
      assert.equal(refused.resolved, false);
      assert.deepEqual(fieldsOf(refused.res), { remainingPoints: 0, msBeforeNext: 60000, consumedPoints: 4, isFirstInDuration: false });
      // A refused call takes nothing from the sliding log: the next refusal says 4 again, and
      // get says 3 (the fixed window counts every call: 5, then 5).
      await compare(l, (x) => x.consume('alice'), { ms: 60000, differ: { consumedPoints: [4, 5] } });
      await compare(l, (x) => x.get('alice'), { ms: 60000, differ: { consumedPoints: [3, 5] } });
      // Asking for more than points at once: refused by both, nothing logged by ours.
      await compare(l, (x) => x.consume('bob', 5), { differ: { msBeforeNext: [0, 60000] } });
      // The referee has counted 5 for bob; ours logged nothing, so bob has no key.
      assert.equal(await l.ours.get('bob'), null);
      assert.equal((await l.ref.get('bob')).consumedPoints, 5);
      await compare(l, (x) => x.delete('alice'));
      assert.equal(await l.ours.delete('alice'), false);
      await compare(l, (x) => x.delete('alice'));
      await compare(l, (x) => x.get('alice'));
      assert.equal(await l.ours.get('alice'), null);
      // One key per limiter and user, named as the library names it.
      assert.deepEqual(await server.admin.keys('ours*'), []);
      await l.ours.consume('carol');
      assert.deepEqual(await server.admin.keys('ours*'), ['ours:carol']);
      assert.deepEqual(await server.admin.call('RATELIMIT.CONFIG', 'ours:carol'),
        ['rate', 3, 'interval', 60000, 'type', 'ONEKEY', 'keepAliveTime', 60000]);
    });

    it(`blockDuration: the refusal that crosses points blocks for blockDuration (${client})`, async () => {
      const l = pair(client, { points: 2, duration: 10, blockDuration: 30 });
      await compare(l, (x) => x.consume('u'), { ms: 10000 });
      await compare(l, (x) => x.consume('u'), { ms: 10000 });
      const blocked = await compare(l, (x) => x.consume('u'), { ms: 30000 });
      assert.equal(blocked.resolved, false);
      assert.equal(blocked.res.consumedPoints, 3);
      await compare(l, (x) => x.get('u'), { ms: 30000 });
      // While blocked every call is refused until the block ends; ours does not count them.
      await compare(l, (x) => x.consume('u'), { ms: 30000 });
      await compare(l, (x) => x.get('u'), { ms: 30000, differ: { consumedPoints: [3, 4] } });

      // The block outlives the window: refused until its last millisecond, on the debug clock.
      await advance(29999);
      const late = await settle(l.ours.consume('u'));
      assert.equal(late.resolved, false);
      assert.deepEqual(fieldsOf(late.res), { remainingPoints: 0, msBeforeNext: 1, consumedPoints: 4, isFirstInDuration: false });
      // The block is the key itself, expiring (real clock) by the millisecond it ends, with no
      // keep-alive to move that: the next call then starts a window of its own.
      const ttl = await server.admin.pttl('ours:u');
      assert.ok(ttl > 0 && ttl <= 29999, `PTTL ${ttl}`);
      assert.deepEqual(await server.admin.call('RATELIMIT.CONFIG', 'ours:u'),
        ['rate', 3, 'interval', 30000, 'type', 'ONEKEY', 'keepAliveTime', 0]);
      await server.admin.del('ours:u'); // stands for that expiry, which the debug clock cannot reach
      const after = await settle(l.ours.consume('u'));
      assert.deepEqual(fieldsOf(after.res), { remainingPoints: 1, msBeforeNext: 10000, consumedPoints: 1, isFirstInDuration: true });
    });

    it(`block(), set(), and a block forever (${client})`, async () => {
      const l = pair(client, { points: 3, duration: 10 });
      const blocked = await compare(l, (x) => x.block('u', 20), { ms: 20000 });
      assert.deepEqual(fieldsOf(blocked.res), { remainingPoints: 0, msBeforeNext: 20000, consumedPoints: 4, isFirstInDuration: false });
      await compare(l, (x) => x.get('u'), { ms: 20000 });
      await compare(l, (x) => x.consume('u'), { ms: 20000 });
      await compare(l, (x) => x.consume('u', 3), { ms: 20000, differ: { consumedPoints: [7, 8] } });

      await compare(l, (x) => x.block('v', 0), { ms: -1 });
      await compare(l, (x) => x.get('v'), { ms: -1 });
      // rate-limiter-flexible's script gives a key without a TTL one of duration on the next
      // consume, so its block forever ends a duration later; ours stays.
      await compare(l, (x) => x.consume('v'), { differ: { msBeforeNext: [-1] } });
      assert.equal(await server.admin.pttl('ours:v'), -1);
      assert.ok(await server.admin.pttl('ref:v') > 0);

      // set: 2 consumed for 5 s, so one more fits, then refused until the 5 s end.
      await compare(l, (x) => x.set('w', 2, 5), { ms: 5000 });
      await compare(l, (x) => x.get('w'), { ms: 5000 });
      await compare(l, (x) => x.consume('w'), { ms: 5000 });
      await compare(l, (x) => x.consume('w'), { ms: 5000 });
      await compare(l, (x) => x.delete('v'));
      await compare(l, (x) => x.get('v'));

      // A reward gives a blocked key points back: as many calls pass as the counter would let.
      await compare(l, (x) => x.block('r', 20), { ms: 20000 });
      await compare(l, (x) => x.reward('r', 2), { ms: 20000 });
      await compare(l, (x) => x.consume('r'), { ms: 20000 });
      await compare(l, (x) => x.consume('r'), { ms: 20000 });
      await compare(l, (x) => x.get('r'), { ms: 20000 });
    });

    it(`penalty and reward (${client})`, async () => {
      const l = pair(client, { points: 5, duration: 60 });
      await compare(l, (x) => x.penalty('p', 2), { ms: 60000 });
      await compare(l, (x) => x.consume('p'), { ms: 60000 });
      await compare(l, (x) => x.reward('p', 1), { ms: 60000 });
      await compare(l, (x) => x.get('p'), { ms: 60000 });
      await compare(l, (x) => x.penalty('p', 3), { ms: 60000 });
      // Beyond points: reported as the library reports it, but the log keeps only points.
      const over = await compare(l, (x) => x.penalty('p', 2), { ms: 60000 });
      assert.equal(over.res.consumedPoints, 7);
      await compare(l, (x) => x.get('p'), { ms: 60000, differ: { consumedPoints: [5, 7] } });
      await compare(l, (x) => x.reward('p', 2), { ms: 60000, differ: { consumedPoints: [3, 5], remainingPoints: [2, 0] } });
      await compare(l, (x) => x.consume('p'), { ms: 60000, differ: { resolved: [true, false], consumedPoints: [4, 6], remainingPoints: [1, 0] } });
      // There is no credit below an empty window: a reward of a fresh key takes nothing.
      await compare(l, (x) => x.reward('q', 2), { differ: { consumedPoints: [0, -2], remainingPoints: [5, 7], isFirstInDuration: [false, true], msBeforeNext: [0] } });
      assert.equal(await l.ours.get('q'), null);
    });

    it(`insuranceLimiter takes over on a store error; without it the Error rejects (${client})`, async () => {
      await server.admin.set('ours:x', 'not a limiter');
      await server.admin.set('ref:x', 'not a counter');
      const l = pair(client, { points: 1, duration: 60 });
      const failed = await compare(l, (x) => x.consume('x'));
      assert.ok(failed.res instanceof Error);
      assert.match(failed.res.message, /WRONGTYPE/);
      const insured = pair(client, { points: 1, duration: 60 });
      // Each its own insurance, as the library's RateLimiterMemory keeps its points in itself.
      insured.ours.insuranceLimiter = new upstream.RateLimiterMemory({ points: 1, duration: 60 });
      insured.ref.insuranceLimiter = new upstream.RateLimiterMemory({ points: 1, duration: 60 });
      const res = await compare(insured, (x) => x.consume('x'));
      assert.equal(res.resolved, true);
      assert.equal(res.res.consumedPoints, 1);
      const both = await settle(insured.ours.consume('x'));
      assert.equal(both.resolved, false);
      assert.ok(both.res instanceof upstream.RateLimiterRes);
    });
  }

  it('reads the module\'s replies over RESP3 too (node-redis)', async () => {
    const resp3 = createClient({ socket: { port: server.port, host: '127.0.0.1' }, RESP: 3 });
    await resp3.connect();
    try {
      const l = { ours: new RateLimiterRedis({ storeClient: resp3, points: 2, duration: 10, keyPrefix: 'ours' }) };
      assert.deepEqual(fieldsOf(await l.ours.consume('r3')), { remainingPoints: 1, msBeforeNext: 10000, consumedPoints: 1, isFirstInDuration: true });
      assert.deepEqual(fieldsOf(await l.ours.get('r3')), { remainingPoints: 1, msBeforeNext: 10000, consumedPoints: 1, isFirstInDuration: false });
      assert.equal((await l.ours.reward('r3')).consumedPoints, 0);
      assert.equal((await l.ours.block('r3', 5)).consumedPoints, 3);
      const refused = await settle(l.ours.consume('r3'));
      assert.deepEqual(fieldsOf(refused.res), { remainingPoints: 0, msBeforeNext: 5000, consumedPoints: 4, isFirstInDuration: false });
      assert.equal(await l.ours.delete('r3'), true);
    } finally {
      await resp3.quit();
    }
  });

  it('a block ends when its key expires, and the next call starts a window of its own', async () => {
    const ours = new RateLimiterRedis({ storeClient: ioredis, points: 2, duration: 10 });
    await ours.block('x', 0.05);
    // The debug clock stands still, so the log would hold the block for ever: only the key's
    // TTL (the server's real clock) can end it. Wait for that expiry, however long it takes.
    while (await server.admin.pttl('rlflx:x') !== -2) {
      await new Promise((resolve) => { setTimeout(resolve, 10); });
    }
    const after = await settle(ours.consume('x'));
    assert.deepEqual(fieldsOf(after.res), { remainingPoints: 1, msBeforeNext: 10000, consumedPoints: 1, isFirstInDuration: true });
    assert.deepEqual(await server.admin.call('RATELIMIT.CONFIG', 'rlflx:x'),
      ['rate', 2, 'interval', 10000, 'type', 'ONEKEY', 'keepAliveTime', 10000]);
  });

  it('execEvenly delays an allowed call and says so in msBeforeNext', async () => {
    const l = pair('ioredis', { points: 4, duration: 0.1, execEvenly: true, execEvenlyMinDelayMs: 1 });
    const first = await settle(l.ours.consume('e'));
    assert.equal(first.res.msBeforeNext, 100); // the first in the window is not delayed
    // The next waits msBeforeNext / (remaining + 2) = 100 / 4 before resolving.
    const second = await settle(l.ours.consume('e'));
    assert.deepEqual(fieldsOf(second.res), { remainingPoints: 2, msBeforeNext: 75, consumedPoints: 2, isFirstInDuration: false });
  });

  it('the in-memory block refuses without a call to the server', async () => {
    const ours = new RateLimiterRedis({ storeClient: ioredis, points: 2, duration: 60, inMemoryBlockOnConsumed: 3, inMemoryBlockDuration: 10 });
    const allows = async () => Number(/calls=(\d+)/.exec(
      (await server.admin.info('commandstats')).split('\n').find((l) => l.includes('ratelimit.allow')) ?? 'calls=0')[1]);
    await ours.consume('m');
    await ours.consume('m');
    const refused = await settle(ours.consume('m'));
    assert.equal(refused.res.msBeforeNext, 10000);
    const calls = await allows();
    const again = await settle(ours.consume('m'));
    assert.equal(again.resolved, false);
    assert.ok(again.res instanceof upstream.RateLimiterRes);
    assert.equal(await allows(), calls);
  });

  it('slides: each point leaves the window a duration after it was taken', async () => {
    const ours = new RateLimiterRedis({ storeClient: nodeRedis, points: 2, duration: 10 });
    await ours.consume('s');
    await advance(4000);
    await ours.consume('s');
    await advance(1000);
    const refused = await settle(ours.consume('s'));
    assert.deepEqual(fieldsOf(refused.res), { remainingPoints: 0, msBeforeNext: 5000, consumedPoints: 3, isFirstInDuration: false });
    await advance(4999);
    assert.equal((await settle(ours.consume('s'))).resolved, false, 'never early');
    await advance(1);
    const allowed = await settle(ours.consume('s'));
    assert.deepEqual(fieldsOf(allowed.res), { remainingPoints: 0, msBeforeNext: 10000, consumedPoints: 2, isFirstInDuration: false });
    assert.deepEqual(fieldsOf(await ours.get('s')), { remainingPoints: 0, msBeforeNext: 10000, consumedPoints: 2, isFirstInDuration: false });
  });

  it('a limiter made with other points or duration keeps them while its key is busy', async () => {
    const limiter = (points, duration) =>
      new RateLimiterRedis({ storeClient: ioredis, points, duration, keyPrefix: 'ours' });
    const config = () => server.admin.call('RATELIMIT.CONFIG', 'ours:k');
    const consume = async (l) => fieldsOf((await settle(l.consume('k'))).res);
    const refusal = (consumedPoints, msBeforeNext) =>
      ({ remainingPoints: 0, msBeforeNext, consumedPoints, isFirstInDuration: false });
    // Made with 2 points per 10 s, and full.
    const old = limiter(2, 10);
    await old.consume('k');
    await old.consume('k');
    // Raised to 5 points: the library checks points on each call, so its third call passes.
    // The key keeps its rate of 2: refused, reported as the refusal of a limiter of 5.
    const raised = limiter(5, 10);
    const ref = new upstream.RateLimiterRedis({ storeClient: ioredis, points: 2, duration: 10, keyPrefix: 'ref' });
    await ref.consume('k');
    await ref.consume('k');
    const refRaised = new upstream.RateLimiterRedis({ storeClient: ioredis, points: 5, duration: 10, keyPrefix: 'ref' });
    assert.equal((await refRaised.consume('k')).consumedPoints, 3);
    assert.deepEqual(await consume(raised), refusal(6, 10000));
    // A window later the log is empty, yet still 2 per window: each grant keeps the key alive.
    await advance(10000);
    assert.equal((await raised.consume('k')).remainingPoints, 4);
    assert.equal((await raised.consume('k')).remainingPoints, 3);
    assert.deepEqual(await consume(raised), refusal(6, 10000));
    assert.deepEqual(await config(), ['rate', 2, 'interval', 10000, 'type', 'ONEKEY', 'keepAliveTime', 10000]);
    // Lowered to 1 point: the key grants up to its 2, and the library's base refuses a grant
    // above points, whose point stays taken; then the key itself refuses. Never above points.
    await advance(10000);
    const lowered = limiter(1, 10);
    assert.equal((await lowered.consume('k')).consumedPoints, 1);
    assert.deepEqual(await consume(lowered), refusal(2, 10000));
    assert.deepEqual(await consume(lowered), refusal(3, 10000));
    assert.equal((await lowered.get('k')).consumedPoints, 2);
    // Lengthened to 60 s: the key keeps its window of 10 s, so 2 points pass every 10 s while
    // it is busy (the library's counter takes the new duration when its current window ends).
    await advance(10000);
    const longer = limiter(2, 60);
    assert.equal((await longer.consume('k')).msBeforeNext, 10000);
    await longer.consume('k');
    await advance(10000);
    assert.equal((await longer.consume('k')).consumedPoints, 1);
    assert.deepEqual(await config(), ['rate', 2, 'interval', 10000, 'type', 'ONEKEY', 'keepAliveTime', 10000]);
    // Once the key expires, idle for a window (a Redis TTL on the real clock, which the debug
    // clock cannot reach: DEL stands for it) or delete()d, the next call makes it anew.
    assert.equal(await longer.delete('k'), true);
    await raised.consume('k');
    assert.deepEqual(await config(), ['rate', 5, 'interval', 10000, 'type', 'ONEKEY', 'keepAliveTime', 10000]);
  });

  it('customDuration sets the window of a key it creates; duration 0 never expires', async () => {
    const l = pair('ioredis', { points: 2, duration: 60 });
    await compare(l, (x) => x.consume('c', 1, { customDuration: 5 }), { ms: 5000 });
    assert.equal((await server.admin.call('RATELIMIT.CONFIG', 'ours:c'))[3], 5000);
    const forever = pair('ioredis', { points: 2, duration: 0 });
    await compare(forever, (x) => x.consume('f'), { ms: -1 });
    await compare(forever, (x) => x.consume('f'), { ms: -1 });
    await compare(forever, (x) => x.consume('f'), { ms: -1 });
    await compare(forever, (x) => x.get('f'), { ms: -1, differ: { consumedPoints: [2, 3] } });
    assert.equal(await server.admin.pttl('ours:f'), -1);
    assert.equal((await server.admin.call('RATELIMIT.CONFIG', 'ours:f'))[3], FOREVER);
    // A duration under a second: the library's script takes whole seconds, and its key then
    // never expires; ours is a window of those milliseconds.
    const short = pair('ioredis', { points: 2, duration: 0.5 });
    await compare(short, (x) => x.consume('h'), { differ: { msBeforeNext: [500] } });
    assert.equal(await server.admin.pttl('ref:h'), -1);
  });

  it('above 60 points, a point leaves the window at most a sixtieth of it late', async () => {
    const l = pair('node-redis', { points: 100, duration: 60 });
    // Logged in the second-long bucket of T0, at its last millisecond: 999 ms later than the
    // fixed window's TTL.
    await compare(l, (x) => x.consume('big', 10), { differ: { msBeforeNext: [60999] } });
    await compare(l, (x) => x.get('big'), { differ: { msBeforeNext: [60999] } });
    assert.equal((await settle(l.ours.consume('big'))).res.msBeforeNext, 60999);
  });

  it('rejectIfRedisNotReady rejects at once while the client is not connected', async () => {
    const offline = new Redis({ port: server.port, host: '127.0.0.1', lazyConnect: true });
    const l = {
      ours: new RateLimiterRedis({ storeClient: offline, points: 1, duration: 1, rejectIfRedisNotReady: true }),
      ref: new upstream.RateLimiterRedis({ storeClient: offline, points: 1, duration: 1, rejectIfRedisNotReady: true }),
    };
    const r = await compare(l, (x) => x.consume('k'));
    assert.equal(r.res.message, 'Redis connection is not ready');
    offline.disconnect();
  });

  it('points 0 refuses every consume, as the library does, and logs nothing', async () => {
    const l = {
      ours: new RateLimiterRedis({ storeClient: ioredis, points: 0, duration: 5, keyPrefix: 'zero' }),
      ref: new upstream.RateLimiterRedis({ storeClient: ioredis, points: 0, duration: 5, keyPrefix: 'zeroref' }),
    };
    for (let i = 0; i < 2; i += 1) {
      // The library counts each refused call (its counter reads 2 after two); the log takes none,
      // so ours says a whole window to wait each time, the library what its counter has left.
      const r = await compare(l, (x) => x.consume('k'), {
        ms: 5000,
        differ: i === 0 ? {} : { consumedPoints: [1, 2], isFirstInDuration: [true, false] },
      });
      assert.equal(r.resolved, false);
    }
    assert.equal(await ioredis.exists('zero:k'), 0, 'nothing logged');
    // No window (duration 0): both say never (-1).
    const forever = {
      ours: new RateLimiterRedis({ storeClient: ioredis, points: 0, duration: 0, keyPrefix: 'zero0' }),
      ref: new upstream.RateLimiterRedis({ storeClient: ioredis, points: 0, duration: 0, keyPrefix: 'zero0ref' }),
    };
    const r = await compare(forever, (x) => x.consume('k'), { ms: -1 });
    assert.equal(r.resolved, false);
  });

  it('a client it cannot drive fails the first call, not the constructor, as in the library', async () => {
    const l = new RateLimiterRedis({ storeClient: {}, points: 1, duration: 1 });
    await assert.rejects(l.consume('k'), /storeClient must be an ioredis/);
    // With rejectIfRedisNotReady, a client showing it is not ready is refused first, whatever it
    // is: ioredis's status, node-redis's isReady (method or flag), a cluster's isOpen and the
    // key's node. Both classes, the same stubs.
    const stubs = [
      { status: 'closed' },
      { isReady: () => false },
      { isReady: false },
      { isOpen: false, _slots: { getClient: () => undefined } },
      { isOpen: true, _slots: { getClient: () => ({ isReady: false }) } },
      { isOpen: true, _slots: { getClient: () => { throw new Error('no slot'); } } },
    ];
    for (const storeClient of stubs) {
      for (const Class of [RateLimiterRedis, upstream.RateLimiterRedis]) {
        const x = new Class({ storeClient, points: 1, duration: 1, rejectIfRedisNotReady: true });
        await assert.rejects(x.consume('k'), { message: 'Redis connection is not ready' }, JSON.stringify(storeClient));
        await assert.rejects(x.get('k'), { message: 'Redis connection is not ready' });
      }
    }
  });

  it('refuses the options a sliding log cannot serve, naming them', () => {
    const base = { storeClient: ioredis, points: 5, duration: 60 };
    const cases = [
      [{ points: -1 }, /points must be an integer between 0 and 4294967295/],
      [{ points: 1.5 }, /points must be an integer/],
      [{ duration: 0.0001 }, /duration must be 0 or a number of seconds/],
      [{ duration: undefined }, /duration must be set/],
      [{ blockDuration: -1 }, /blockDuration/],
      [{ blockOnConsumed: 10 }, /blockOnConsumed above points \+ 1 cannot be reached/],
      [{ inMemoryBlockOnConsumed: 7 }, /inMemoryBlockOnConsumed above points \+ 1/],
      [{ useRedis3AndLowerPackage: true }, /node-redis 3 and lower/],
      [{ customIncrTtlLuaScript: 'return 1' }, /customIncrTtlLuaScript/],
      [{ storeClient: undefined }, /storeClient is not set/],
    ];
    for (const [opts, message] of cases) {
      assert.throws(() => new RateLimiterRedis({ ...base, ...opts }), message, JSON.stringify(opts));
    }
    // What maps is accepted: blockOnConsumed at points + 1 is the default threshold.
    assert.ok(new RateLimiterRedis({ ...base, blockOnConsumed: 6, inMemoryBlockOnConsumed: 5 }));
    // Points not an integer are an Error from consume, with the library's own messages (its
    // suite matches them exactly), for both: ours and the library's RateLimiterRedis.
    const l = new RateLimiterRedis(base);
    const ref = new upstream.RateLimiterRedis({ ...base, keyPrefix: 'ref' });
    const decimal = { message: 'Consuming decimal number of points is not supported by this package' };
    const string = { message: 'Consuming string different than integer values is not supported by this package' };
    return Promise.all([
      ...[l, ref].flatMap((x) => [
        assert.rejects(x.consume('k', 1.5), decimal),
        assert.rejects(x.penalty('k', 0.5), decimal),
        assert.rejects(x.consume('k', 'x'), string),
        assert.rejects(x.consume('k', '2.0'), string),
      ]),
      // The library's counter takes a negative consume as a reward; ours refuses it.
      assert.rejects(l.consume('k', -1), /must not be negative/),
    ]);
  });

  it('is a rate-limiter-flexible limiter: RateLimiterUnion and friends take it', async () => {
    const ours = new RateLimiterRedis({ storeClient: ioredis, points: 1, duration: 60 });
    assert.ok(ours instanceof Object.getPrototypeOf(upstream.RateLimiterRedis));
    const union = new upstream.RateLimiterUnion(ours, new upstream.RateLimiterMemory({ keyPrefix: 'mem', points: 5, duration: 60 }));
    await union.consume('z');
    const refused = await settle(union.consume('z'));
    assert.equal(refused.resolved, false);
    assert.equal(refused.res.rlflx.consumedPoints, 2);
  });
});

describe('RateLimiterRedis on a 3-master cluster', () => {
  let cluster;

  before(async () => {
    cluster = await startCluster();
    await Promise.all(cluster.nodes.map((n) => n.admin.call('RATELIMIT.DEBUG', 'SETCLOCK', String(T0))));
  });

  after(async () => {
    await cluster.stop();
  });

  const clusterClients = {
    'ioredis Cluster': async () => {
      const redis = new Redis.Cluster(cluster.seeds);
      return { redis, close: () => redis.disconnect() };
    },
    'node-redis cluster': async () => {
      const redis = createCluster({ rootNodes: cluster.seeds.map((s) => ({ socket: s })) });
      await redis.connect();
      return { redis, close: () => redis.quit() };
    },
  };

  for (const [name, connect] of Object.entries(clusterClients)) {
    it(`serves every call on its key's master, with no MOVED, ASK or CROSSSLOT (${name})`, async () => {
      const { redis, close } = await connect();
      try {
        const limiter = new RateLimiterRedis({ storeClient: redis, points: 2, duration: 60, blockDuration: 120, keyPrefix: name });
        const users = Array.from({ length: 12 }, (_, i) => `user${i}`);
        for (const user of users) {
          assert.equal((await limiter.consume(user)).consumedPoints, 1);
          assert.equal((await limiter.penalty(user)).consumedPoints, 2);
          const refused = await settle(limiter.consume(user));
          assert.deepEqual(fieldsOf(refused.res), { remainingPoints: 0, msBeforeNext: 120000, consumedPoints: 3, isFirstInDuration: false });
          assert.equal((await limiter.get(user)).consumedPoints, 3);
          assert.equal((await limiter.reward(user)).consumedPoints, 2);
          assert.equal((await limiter.block(user, 5)).msBeforeNext, 5000);
          assert.equal(await limiter.delete(user), true);
          assert.equal(await limiter.get(user), null);
          await limiter.consume(user);
          // The limiter is one key, on the master of its slot.
          const node = await cluster.nodeOf(`${name}:${user}`);
          assert.equal(await node.admin.exists(`${name}:${user}`), 1);
        }
        assert.deepEqual(await cluster.redirections(), []);
      } finally {
        await close();
      }
    });
  }
});

// The Redis stores a Node API can limit with, side by side in one run on one server:
// ratelimit-node's RedisStore (RATELIMIT.ALLOW, a sliding log in one key) beside
// rate-limit-redis's RedisStore (its fixed-window script on one key), and
// ratelimit-node/flexible's RateLimiterRedis (RATELIMIT.ALLOW too) beside rate-limiter-flexible's
// own RateLimiterRedis (its fixed-window script on one key). For each, on a hot key and on
// 200 000 keys at random:
// server CPU per call (INFO commandstats' usec of the command the store sends, and the server
// process's CPU, INFO cpu, over the calls) and the client's p50/p99 per call.
//
//   RATELIMIT_MODULE=target/release/libratelimit.so REDIS_SERVER=redis-server node node/bench/bench.js [--quick]
'use strict';

const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');
const { RedisStore: RateLimitRedisStore } = require('rate-limit-redis');
const { RedisStore } = require('..');
const { RateLimiterRedis: FlexibleOnModule } = require('../flexible');
const { startServer } = require('../test/servers');

const quick = process.argv.includes('--quick');
const CALLS = quick ? 2000 : 20000;
const KEYS = quick ? 20000 : 200000;
const WINDOW = 60000;
const IN_FLIGHT = 32; // warming up the keys

/** The stores, each made as its README says, with the ioredis client; `call(key)` is one request. */
function stores(redis, limit) {
  const send = { sendCommand: (command, ...args) => redis.call(command, ...args) };
  const ours = new RedisStore({ ...send, prefix: 'ours:' });
  ours.init({ limit, windowMs: WINDOW });
  const theirs = new RateLimitRedisStore({ ...send, prefix: 'rlr:' });
  const flexible = new RateLimiterRedis({
    storeClient: redis, keyPrefix: 'rlf', points: limit, duration: WINDOW / 1000,
  });
  const flexibleOnModule = new FlexibleOnModule({
    storeClient: redis, keyPrefix: 'ours-rlf', points: limit, duration: WINDOW / 1000,
  });
  // A refusal rejects with the limiter's result: a normal answer here.
  const consume = (limiter) => (k) => limiter.consume(k).catch((res) => {
    if (res instanceof Error) throw res;
    return res;
  });
  return [
    {
      name: 'ratelimit-node RedisStore',
      command: 'ratelimit.allow',
      replaces: 'rate-limit-redis RedisStore',
      init: () => {},
      call: (k) => ours.increment(k),
    },
    {
      name: 'rate-limit-redis RedisStore',
      command: 'evalsha',
      init: () => theirs.init({ windowMs: WINDOW }),
      call: (k) => theirs.increment(k),
    },
    {
      name: 'ratelimit-node/flexible RateLimiterRedis',
      command: 'ratelimit.allow',
      replaces: 'rate-limiter-flexible RateLimiterRedis',
      init: () => {},
      call: consume(flexibleOnModule),
    },
    {
      name: 'rate-limiter-flexible RateLimiterRedis',
      command: 'evalsha',
      init: () => {},
      call: consume(flexible),
    },
  ];
}

function infoFields(text) {
  const out = {};
  for (const line of text.split('\r\n')) {
    const at = line.indexOf(':');
    if (at > 0) out[line.slice(0, at)] = line.slice(at + 1);
  }
  return out;
}

async function serverCpu(admin) {
  const cpu = infoFields(await admin.info('cpu'));
  return Number(cpu.used_cpu_user) + Number(cpu.used_cpu_sys);
}

async function commandUsec(admin, command) {
  const stats = infoFields(await admin.info('commandstats'));
  const line = stats[`cmdstat_${command}`];
  if (!line) return { calls: 0, usec: 0 };
  const f = Object.fromEntries(line.split(',').map((kv) => kv.split('=')));
  return { calls: Number(f.calls), usec: Number(f.usec) };
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

async function measure(admin, store, keyOf) {
  const latencies = new Float64Array(CALLS);
  await admin.call('CONFIG', 'RESETSTAT');
  const cpu0 = await serverCpu(admin);
  for (let i = 0; i < CALLS; i += 1) {
    const key = keyOf(i);
    const t0 = process.hrtime.bigint();
    // eslint-disable-next-line no-await-in-loop
    await store.call(key);
    latencies[i] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  const cpu1 = await serverCpu(admin);
  const stat = await commandUsec(admin, store.command);
  latencies.sort();
  return {
    commandUsecPerCall: stat.usec / CALLS,
    commandCalls: stat.calls,
    serverCpuUsecPerCall: ((cpu1 - cpu0) * 1e6) / CALLS,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

async function warm(store, count) {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next;
      next += 1;
      // eslint-disable-next-line no-await-in-loop
      await store.call(`user:${i}`);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}

async function main() {
  const server = await startServer();
  const version = infoFields(await server.admin.info('server'));
  const serverName = version.valkey_version ? `Valkey ${version.valkey_version}` : `Redis ${version.redis_version}`;
  const redis = new Redis({ port: server.port, host: '127.0.0.1' });
  const rows = [];
  try {
    const scenarios = [
      // One busy client under a high limit: every call is granted (the log holds up to one entry
      // per millisecond of the window).
      { name: 'hot key, granted', limit: 1000000, keyOf: () => 'hot', warmKeys: 0 },
      // One client over its limit: every call is refused.
      { name: 'hot key, refused', limit: 10, keyOf: () => 'hot', warmKeys: 0, fill: 10 },
      // A limiter per user: 200 000 users, each seen once before, called at random.
      {
        name: `${KEYS / 1000}k keys at random`,
        limit: 100,
        keyOf: () => `user:${Math.floor(Math.random() * KEYS)}`,
        warmKeys: KEYS,
      },
    ];
    for (const scenario of scenarios) {
      for (const store of stores(redis, scenario.limit)) {
        await server.admin.flushall();
        await store.init();
        for (let i = 0; i < (scenario.fill ?? 0); i += 1) await store.call('hot');
        const memory0 = Number(infoFields(await server.admin.info('memory')).used_memory);
        if (scenario.warmKeys) await warm(store, scenario.warmKeys);
        const memory1 = Number(infoFields(await server.admin.info('memory')).used_memory);
        const result = await measure(server.admin, store, scenario.keyOf);
        rows.push({
          scenario: scenario.name,
          store: store.name,
          replaces: store.replaces,
          ...result,
          bytesPerKey: scenario.warmKeys ? (memory1 - memory0) / scenario.warmKeys : undefined,
        });
        process.stderr.write(`${scenario.name}: ${store.name} done\n`);
      }
    }
  } finally {
    redis.disconnect();
    await server.stop();
  }

  console.log(`\n${serverName}, ${CALLS} calls per row, one at a time (ioredis ${require('ioredis/package.json').version})\n`);
  console.log('| scenario | store | command µs/call | server CPU µs/call | vs the store it replaces | p50 µs | p99 µs | bytes/key |');
  console.log('|---|---|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const base = rows.find((b) => b.scenario === r.scenario && b.store === r.replaces);
    const ratio = base ? `${(r.serverCpuUsecPerCall / base.serverCpuUsecPerCall).toFixed(2)}x` : '';
    console.log(`| ${r.scenario} | ${r.store} | ${r.commandUsecPerCall.toFixed(2)} | ${r.serverCpuUsecPerCall.toFixed(1)} | `
      + `${ratio} | ${r.p50.toFixed(0)} | ${r.p99.toFixed(0)} | `
      + `${r.bytesPerKey === undefined ? '' : r.bytesPerKey.toFixed(0)} |`);
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});

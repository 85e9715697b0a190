// The Redis stores a Node API can limit with, side by side in one run on one server:
// ratelimit-node's RedisStore (RATELIMIT.ALLOW, a sliding log in one key) beside
// rate-limit-redis's RedisStore (its fixed-window script on one key), and
// ratelimit-node/flexible's RateLimiterRedis (RATELIMIT.ALLOW too) beside rate-limiter-flexible's
// own RateLimiterRedis (its fixed-window script on one key). On a hot key granted, a hot key
// refused and 200 000 keys at random: ROUNDS rounds of CALLS/ROUNDS calls per store, the stores'
// order rotated each round, so a change in the machine's load falls on every store alike. Per
// store, the median over the rounds of the command's time per call (INFO commandstats) and of the
// server's CPU per call (INFO cpu; the main thread's too where INFO gives it), the median of each
// round's ratio of ours to the store its users leave, and the client's p50/p99 over all its calls.
//
//   RATELIMIT_MODULE=target/release/libratelimit.so REDIS_SERVER=redis-server \
//     node node/bench/bench.js [--quick] [--rounds=N]      (ROUNDS=N in the environment also works)
'use strict';

const os = require('node:os');
const Redis = require('ioredis');
const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible');
const { RedisStore: RateLimitRedisStore } = require('rate-limit-redis');
const { RedisStore } = require('..');
const { RateLimiterRedis: FlexibleOnModule } = require('../flexible');
const { startServer } = require('../test/servers');

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const roundsFlag = argv.find((a) => a.startsWith('--rounds='));
const roundsText = roundsFlag ? roundsFlag.slice('--rounds='.length) : (process.env.ROUNDS ?? '5');
const ROUNDS = Number(roundsText);
if (!/^[0-9]+$/.test(roundsText) || ROUNDS < 1) {
  console.error(`bench: the number of rounds (--rounds= or ROUNDS) must be a positive integer, not "${roundsText}"`);
  process.exit(2);
}
const unknown = argv.filter((a) => a !== '--quick' && !a.startsWith('--rounds='));
if (unknown.length) {
  console.error(`bench: unknown argument ${unknown[0]} (usage: bench.js [--quick] [--rounds=N])`);
  process.exit(2);
}
const CALLS = quick ? 2000 : 20000; // per store and scenario, over all the rounds
const PER_ROUND = Math.ceil(CALLS / ROUNDS);
const KEYS = quick ? 20000 : 200000;
const WINDOW = 60000;
const IN_FLIGHT = 32; // making the keys
// The keys made before the rounds live this long: each store's keys are made one store after
// the other, and a key whose minute ran out before the last round would be measured as a new one.
const KEYS_LIVE_MS = 30 * 60000;

/**
 * The stores, each made as its README says, each with an ioredis client of its own on a database
 * of its own (so each store's keys fill a key table of their own, as on a server of its own).
 * `call(key)` is one request; it checks the reply and resolves to whether it was granted.
 */
function stores(clients, limit) {
  const send = (redis) => ({ sendCommand: (command, ...args) => redis.call(command, ...args) });
  const ours = new RedisStore({ ...send(clients[0]), prefix: 'ours:' });
  ours.init({ limit, windowMs: WINDOW });
  const theirs = new RateLimitRedisStore({ ...send(clients[1]), prefix: 'rlr:' });
  const flexibleOnModule = new FlexibleOnModule({
    storeClient: clients[2], keyPrefix: 'ours-rlf', points: limit, duration: WINDOW / 1000,
  });
  const flexible = new RateLimiterRedis({
    storeClient: clients[3], keyPrefix: 'rlf', points: limit, duration: WINDOW / 1000,
  });
  // express-rate-limit's store contract: hits in the window, and when it resets.
  const increment = (store) => async (k) => {
    const r = await store.increment(k);
    if (!Number.isInteger(r.totalHits) || r.totalHits < 1 || !(r.resetTime instanceof Date)) {
      throw new Error(`bench: unexpected increment result ${JSON.stringify(r)}`);
    }
    return r.totalHits <= limit;
  };
  // consume resolves with a RateLimiterRes when granted and rejects with one when refused.
  const consume = (limiter) => (k) => limiter.consume(k).then((res) => {
    if (!(res instanceof RateLimiterRes) || res.remainingPoints < 0) {
      throw new Error(`bench: unexpected consume result ${JSON.stringify(res)}`);
    }
    return true;
  }, (res) => {
    if (!(res instanceof RateLimiterRes) || res.remainingPoints !== 0) throw res;
    return false;
  });
  return [
    {
      name: 'ratelimit-node RedisStore',
      redis: clients[0],
      command: 'ratelimit.allow',
      replaces: 'rate-limit-redis RedisStore',
      init: () => {},
      call: increment(ours),
    },
    {
      name: 'rate-limit-redis RedisStore',
      redis: clients[1],
      command: 'evalsha',
      init: () => theirs.init({ windowMs: WINDOW }),
      call: increment(theirs),
    },
    {
      name: 'ratelimit-node/flexible RateLimiterRedis',
      redis: clients[2],
      command: 'ratelimit.allow',
      replaces: 'rate-limiter-flexible RateLimiterRedis',
      init: () => {},
      call: consume(flexibleOnModule),
    },
    {
      name: 'rate-limiter-flexible RateLimiterRedis',
      redis: clients[3],
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

/**
 * One reading of the server's counters: the command's calls and usec (INFO commandstats), the
 * process's CPU seconds and, where INFO gives them (Redis 7+, Valkey), the main thread's.
 */
async function reading(admin, command) {
  const f = infoFields(await admin.call('INFO', 'cpu', 'commandstats'));
  const stat = Object.fromEntries((f[`cmdstat_${command}`] ?? '').split(',').filter(Boolean)
    .map((kv) => kv.split('=')));
  const main = f.used_cpu_user_main_thread === undefined ? undefined
    : Number(f.used_cpu_user_main_thread) + Number(f.used_cpu_sys_main_thread);
  return {
    calls: Number(stat.calls ?? 0),
    failed: Number(stat.failed_calls ?? 0) + Number(stat.rejected_calls ?? 0),
    usec: Number(stat.usec ?? 0),
    cpu: Number(f.used_cpu_user) + Number(f.used_cpu_sys),
    main,
  };
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** One store's share of a round: PER_ROUND calls one at a time, the counters read around them. */
async function share(admin, store, keyOf, sink) {
  const before = await reading(admin, store.command);
  let granted = 0;
  for (let i = 0; i < PER_ROUND; i += 1) {
    const key = keyOf();
    const t0 = process.hrtime.bigint();
    // eslint-disable-next-line no-await-in-loop
    if (await store.call(key)) granted += 1;
    sink.latencies[sink.n] = Number(process.hrtime.bigint() - t0) / 1000;
    sink.n += 1;
  }
  const after = await reading(admin, store.command);
  if (after.calls - before.calls !== PER_ROUND || after.failed !== before.failed) {
    throw new Error(`bench: ${store.name} sent ${after.calls - before.calls} ${store.command} `
      + `(${after.failed - before.failed} failed) for ${PER_ROUND} calls`);
  }
  return {
    command: (after.usec - before.usec) / PER_ROUND,
    cpu: ((after.cpu - before.cpu) * 1e6) / PER_ROUND,
    main: before.main === undefined ? undefined : ((after.main - before.main) * 1e6) / PER_ROUND,
    granted,
  };
}

async function makeKeys(store, count) {
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

/** Gives every key of the store's database that has a TTL the same long one (KEYS_LIVE_MS). */
async function keepKeys(redis) {
  let cursor = '0';
  do {
    // eslint-disable-next-line no-await-in-loop
    const [next, keys] = await redis.scan(cursor, 'COUNT', 1000);
    cursor = next;
    const p = redis.pipeline();
    for (const k of keys) p.call('PEXPIRE', k, KEYS_LIVE_MS, 'GT');
    // eslint-disable-next-line no-await-in-loop
    for (const [error] of await p.exec()) if (error) throw error;
  } while (cursor !== '0');
}

/** Waits until no key table of the database is being rehashed: a table being grown makes every
 * lookup probe two tables and every command move buckets, which would fall on whoever runs next. */
async function settle(admin, db) {
  for (let i = 0; i < 600; i += 1) {
    // eslint-disable-next-line no-await-in-loop
    const stats = String(await admin.call('DEBUG', 'HTSTATS', db));
    if (!stats.includes('rehashing target')) return;
    // eslint-disable-next-line no-await-in-loop
    await new Promise((resolve) => { setTimeout(resolve, 100); });
  }
  throw new Error(`bench: database ${db} still rehashing after 60 s`);
}

const SCENARIOS = [
  // One busy client under a high limit: every call is granted (the log holds up to one entry
  // per millisecond of the window).
  { name: 'hot key, granted', limit: 1000000, keyOf: () => 'hot', before: 1, allGranted: true },
  // One client over its limit: every call is refused (but for the calls a new window grants, if
  // the rounds outlast the minute the limit was filled in).
  { name: 'hot key, refused', limit: 10, keyOf: () => 'hot', before: 10, allGranted: false },
  // A limiter per user: KEYS users, each seen once before, called at random.
  {
    name: `${KEYS / 1000}k keys at random`,
    limit: 100,
    keyOf: () => `user:${Math.floor(Math.random() * KEYS)}`,
    keys: KEYS,
    allGranted: true,
  },
];

async function runScenario(server, clients, scenario) {
  const { admin } = server;
  await admin.flushall();
  const list = stores(clients, scenario.limit);
  const rows = new Map();
  // Each store's keys, made before the rounds as a service would have made them: its own calls.
  for (const store of list) {
    await store.init();
    const memory0 = Number(infoFields(await admin.info('memory')).used_memory);
    if (scenario.keys) await makeKeys(store, scenario.keys);
    for (let i = 0; i < (scenario.before ?? 0); i += 1) await store.call('hot');
    const memory1 = Number(infoFields(await admin.info('memory')).used_memory);
    rows.set(store, {
      bytesPerKey: scenario.keys ? (memory1 - memory0) / scenario.keys : undefined,
      rounds: [],
      sink: { latencies: new Float64Array(PER_ROUND * ROUNDS), n: 0 },
    });
  }
  if (scenario.keys) for (const store of list) await keepKeys(store.redis);
  for (let db = 1; db <= list.length; db += 1) await settle(admin, db);
  for (let r = 0; r < ROUNDS; r += 1) {
    const order = [...list.slice(r % list.length), ...list.slice(0, r % list.length)];
    for (const store of order) {
      const row = rows.get(store);
      const got = await share(admin, store, scenario.keyOf, row.sink);
      if (scenario.allGranted && got.granted !== PER_ROUND) {
        throw new Error(`bench: ${scenario.name}: ${store.name} refused ${PER_ROUND - got.granted} of ${PER_ROUND}`);
      }
      // A refusal is a read where a grant is a write: a share that granted more than a few calls
      // (its window ran out mid-run) would compare a store's writes with another's reads.
      if (!scenario.allGranted && got.granted > PER_ROUND / 100) {
        throw new Error(`bench: ${scenario.name}: ${store.name} granted ${got.granted} of ${PER_ROUND} ` +
          'calls meant to be refused (the run outlasted the window?)');
      }
      row.rounds.push(got);
    }
    process.stderr.write(`${scenario.name}: round ${r + 1}/${ROUNDS} done\n`);
  }
  return list.map((store) => {
    const row = rows.get(store);
    const lat = row.sink.latencies.sort();
    const base = store.replaces && rows.get(list.find((s) => s.name === store.replaces));
    // Each round's ratio of ours to the store it replaces, both measured in that round.
    const ratios = (field) => (base && row.rounds[0][field] !== undefined
      ? row.rounds.map((x, i) => x[field] / base.rounds[i][field]) : undefined);
    const ratio = (field) => (ratios(field) === undefined ? undefined : median(ratios(field)));
    const hasMain = row.rounds[0].main !== undefined;
    return {
      scenario: scenario.name,
      store: store.name,
      replaces: store.replaces,
      command: median(row.rounds.map((x) => x.command)),
      cpu: median(row.rounds.map((x) => x.cpu)),
      main: hasMain ? median(row.rounds.map((x) => x.main)) : undefined,
      commandRatio: ratio('command'),
      cpuRatio: ratio('cpu'),
      mainRatio: hasMain ? ratio('main') : undefined,
      commandRatios: ratios('command'),
      cpuRatios: ratios('cpu'),
      granted: row.rounds.reduce((n, x) => n + x.granted, 0) / (PER_ROUND * ROUNDS),
      p50: percentile(lat, 50),
      p99: percentile(lat, 99),
      bytesPerKey: row.bytesPerKey,
    };
  });
}

const fixed = (x, digits) => (x === undefined ? '' : x.toFixed(digits));
const times = (x) => (x === undefined ? '' : `${x.toFixed(2)}x`);
// The verdict on a median ratio, with the rounds' smallest and largest beside it.
const held = (x, all) => `${x.toFixed(3)}x ${x <= 1 ? 'held' : 'MISSED'} `
  + `(rounds ${Math.min(...all).toFixed(2)}-${Math.max(...all).toFixed(2)}x)`;

function report(serverName, rows, hasMain) {
  const mainCols = hasMain ? ' main thread CPU µs/call |' : '';
  const mainRatio = hasMain ? ' main thread vs it |' : '';
  console.log(`\n${serverName}, ${ROUNDS} rounds of ${PER_ROUND} calls per store, one at a time, the `
    + `stores' order rotated each round (ioredis ${require('ioredis/package.json').version}; `
    + `${os.cpus().length} cores, load average ${os.loadavg()[0].toFixed(1)})`);
  console.log('Medians over the rounds; "vs it": the median of the rounds\' ratios of ours to the store it replaces; '
    + 'p50/p99 over all the store\'s calls.\n');
  console.log(`| scenario | store | command µs/call | server CPU µs/call |${mainCols} command vs it | `
    + `server CPU vs it |${mainRatio} granted | p50 µs | p99 µs | bytes/key |`);
  console.log(`|---|---|---:|---:|${hasMain ? '---:|' : ''}---:|---:|${hasMain ? '---:|' : ''}---:|---:|---:|---:|`);
  for (const r of rows) {
    console.log(`| ${r.scenario} | ${r.store} | ${fixed(r.command, 2)} | ${fixed(r.cpu, 1)} |`
      + `${hasMain ? ` ${fixed(r.main, 1)} |` : ''} ${times(r.commandRatio)} | ${times(r.cpuRatio)} |`
      + `${hasMain ? ` ${times(r.mainRatio)} |` : ''} ${(r.granted * 100).toFixed(1)}% | `
      + `${r.p50.toFixed(0)} | ${r.p99.toFixed(0)} | ${fixed(r.bytesPerKey, 0)} |`);
  }
  console.log('');
  for (const scenario of [...new Set(rows.map((r) => r.scenario))]) {
    const verdicts = rows.filter((r) => r.scenario === scenario && r.replaces).map((r) => `${r.store} <= `
      + `${r.replaces}: command ${held(r.commandRatio, r.commandRatios)}, `
      + `server CPU ${held(r.cpuRatio, r.cpuRatios)}`
      + `${r.mainRatio === undefined ? '' : `, main thread ${r.mainRatio.toFixed(3)}x`}`);
    console.log(`${scenario}: ${verdicts.join('; ')}`);
  }
}

async function main() {
  const server = await startServer(['--enable-debug-command', 'local']);
  const version = infoFields(await server.admin.info('server'));
  const serverName = version.valkey_version ? `Valkey ${version.valkey_version}` : `Redis ${version.redis_version}`;
  const clients = [1, 2, 3, 4].map((db) => new Redis({ port: server.port, host: '127.0.0.1', db }));
  const rows = [];
  try {
    for (const scenario of SCENARIOS) rows.push(...await runScenario(server, clients, scenario));
  } finally {
    for (const c of clients) c.disconnect();
    await server.stop();
  }
  report(serverName, rows, rows[0].main !== undefined);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});

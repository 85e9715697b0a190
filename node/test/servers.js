// Real servers for the tests: redis-server (or valkey-server) with the module, and a 3-master
// cluster, on free loopback ports, stopped afterwards.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const Redis = require('ioredis');

/** The module under test: RATELIMIT_MODULE, else the debug build of this checkout. */
const MODULE = process.env.RATELIMIT_MODULE
  || path.resolve(__dirname, '../../target/debug/libratelimit.so');
const SERVER = process.env.REDIS_SERVER || 'redis-server';

/** A date in 2026 for the module's frozen debug clock, so every number is reproducible. */
const T0 = 1767225600000;

function portFree(port) {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

/** A free port (and, for a cluster node, a free bus port 10000 above it). */
async function freePort(withBus) {
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const port = 20000 + Math.floor(Math.random() * 30000);
    // eslint-disable-next-line no-await-in-loop
    if ((await portFree(port)) && (!withBus || (await portFree(port + 10000)))) return port;
  }
  throw new Error('no free port found');
}

/**
 * Starts a server with the module (debug commands on) and resolves once it accepts connections.
 * `extra` are more server arguments.
 */
async function startServer(extra = [], { cluster = false } = {}) {
  if (!fs.existsSync(MODULE)) {
    throw new Error(`no module at ${MODULE}: run \`cargo build\` (or set RATELIMIT_MODULE)`);
  }
  const port = await freePort(cluster);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratelimit-node-'));
  const child = spawn(SERVER, [
    '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
    '--dir', dir, '--loadmodule', MODULE, 'debug-commands', 'yes', ...extra,
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  await new Promise((resolve, reject) => {
    const onData = (chunk) => {
      log += chunk;
      if (log.includes('Ready to accept connections')) resolve();
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${SERVER} exited (${code}):\n${log}`)));
  });
  child.removeAllListeners('exit');
  const admin = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
  await admin.connect();
  return {
    port,
    admin,
    async stop() {
      admin.disconnect();
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Three masters sharing the 16384 slots evenly, each with the module; resolves once every node
 * sees the whole cluster as ok. */
async function startCluster() {
  const args = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf',
    '--cluster-node-timeout', '5000'];
  const nodes = await Promise.all([0, 1, 2].map(() => startServer(args, { cluster: true })));
  const ranges = [[0, 5460], [5461, 10922], [10923, 16383]];
  await Promise.all(nodes.map((n, i) => n.admin.call('CLUSTER', 'ADDSLOTSRANGE', ...ranges[i])));
  for (const n of nodes.slice(1)) {
    // eslint-disable-next-line no-await-in-loop
    await nodes[0].admin.call('CLUSTER', 'MEET', '127.0.0.1', String(n.port));
  }
  // Gossip spreads the slot map in a few node-timeout ticks: wait for each node to say ok.
  for (let round = 0; ; round += 1) {
    // eslint-disable-next-line no-await-in-loop
    const infos = await Promise.all(nodes.map((n) => n.admin.call('CLUSTER', 'INFO')));
    // eslint-disable-next-line no-await-in-loop
    const maps = await Promise.all(nodes.map((n) => n.admin.call('CLUSTER', 'SLOTS')));
    if (infos.every((i) => i.includes('cluster_state:ok') && i.includes('cluster_known_nodes:3'))
      && maps.every((m) => m.length === 3)) break;
    if (round > 600) throw new Error(`the cluster never became ok:\n${infos.join('\n')}`);
    // eslint-disable-next-line no-await-in-loop
    await new Promise((resolve) => { setTimeout(resolve, 50); });
  }
  return {
    nodes,
    seeds: nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
    /** The master that serves `key`'s slot. */
    async nodeOf(key) {
      const slot = await nodes[0].admin.call('CLUSTER', 'KEYSLOT', key);
      return nodes[ranges.findIndex(([a, b]) => slot >= a && slot <= b)];
    },
    /** Every node's redirections and cross-slot errors (INFO errorstats), to assert none. */
    async redirections() {
      const stats = await Promise.all(nodes.map((n) => n.admin.call('INFO', 'errorstats')));
      return stats.join('\n').split('\n').filter((l) => /errorstat_(MOVED|ASK|CROSSSLOT)/.test(l));
    },
    async stop() {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}

module.exports = { startServer, startCluster, T0, MODULE, SERVER };

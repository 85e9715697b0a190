#!/usr/bin/env node
// Runs rate-limiter-flexible's own RateLimiterRedis tests (mocha) and rate-limit-redis's own store
// test (jest) against this package, from the upstream repositories where they lie (a checkout or
// a git directory): the files are extracted to a temporary directory, unedited, and resolve.js
// points their imports at our drop-ins. One real server with the module on a free loopback port.
//
//   node run.js --flexible <dir|git dir> --rate-limit-redis <dir|git dir> --deps <node_modules>
//
// Every test of the files is run (none excluded). Each must pass, unless differences.txt names it:
// then it must fail (a listed test that passes is reported, so the list stays true).
'use strict';

const { execFileSync, spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { startServer } = require('../servers');

const NODE_PKG = path.resolve(__dirname, '../..');

/**
 * The upstream files, pinned by git blob id (the hash `git ls-tree` shows, computed here from the
 * bytes, so a plain copy is checked too): differences.txt is about these very files.
 * rate-limiter-flexible v11.1.0 (commit 3c9c826248cd470960740c89e25a1277dc98fbf4), rate-limit-redis
 * v5.0.0+ (commit 570da54467c56fca4e36eac22aac5fa970869f02).
 */
const PINNED = {
  flexible: {
    'test/RateLimiterRedis.ioredis.test.js': 'c980b89c909abc12bbd28a339aa234ed85939b10',
    'test/RateLimiterRedis.redis.test.js': '74a137b3432fa476bf39b9f7e8a60ed7af35d110',
    'test/RedisOptions.js': 'b6acfdebbd00b768d08371a470a7eeaa30ee3fa8',
  },
  rateLimitRedis: {
    'test/store-test.ts': '2f44143a2db8e757b6e99863550c55a8ddaabeb4',
  },
};

/** The tests the pinned files hold (skipped ones included), so a run that lost some fails. */
const EXPECTED_TESTS = { flexible: 92, rateLimitRedis: 14 };

const blobId = (bytes) => crypto.createHash('sha1')
  .update(`blob ${bytes.length}\0`).update(bytes).digest('hex');

function args() {
  const out = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) out[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const need of ['flexible', 'rate-limit-redis', 'deps']) {
    if (!out[need]) throw new Error(`run.js: --${need} is required`);
  }
  return out;
}

/** The `pinned` files of `repo` (a work tree, or a git directory read at HEAD), copied into
 * `dest` after their blob ids are checked; resolves the commit they came from, if any. */
function extract(repo, pinned, dest) {
  const git = (...a) => execFileSync('git', ['-C', repo, ...a], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  const files = Object.keys(pinned);
  let commit = 'a directory without git';
  let fromGit = false;
  try {
    commit = git('rev-parse', 'HEAD');
    fromGit = !fs.existsSync(path.join(repo, files[0]));
  } catch { /* a plain directory */ }
  for (const file of files) {
    const bytes = fromGit
      ? execFileSync('git', ['-C', repo, 'show', `HEAD:${file}`])
      : fs.readFileSync(path.join(repo, file));
    if (blobId(bytes) !== pinned[file]) {
      throw new Error(`${repo}: ${file} is not the pinned file (blob ${blobId(bytes)}, want ${pinned[file]}): `
        + 'check out the commit node/test/upstream/README.md names');
    }
    const to = path.join(dest, file);
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.writeFileSync(to, bytes);
  }
  return commit;
}

/** "title<TAB>reason" lines of differences.txt, by suite. */
function differences() {
  const bySuite = {};
  for (const line of fs.readFileSync(path.join(__dirname, 'differences.txt'), 'utf8').split('\n')) {
    if (!line.trim() || line.startsWith('#')) continue;
    const [suite, title] = line.split('\t'); // the third column says which difference
    (bySuite[suite] ||= new Set()).add(title);
  }
  return bySuite;
}

function runMocha(suiteDir, files, deps, env) {
  const report = path.join(suiteDir, 'mocha-report.json');
  const run = spawnSync(process.execPath, [
    path.join(deps, 'mocha', 'bin', 'mocha.js'),
    '--require', path.join(__dirname, 'resolve.js'),
    '--require', path.join(__dirname, 'unhandled.js'),
    '--reporter', 'json', '--reporter-option', `output=${report}`,
    '--exit',
    ...files.map((f) => path.join(suiteDir, f)),
  ], { env, stdio: ['ignore', 'inherit', 'inherit'] });
  if (!fs.existsSync(report)) throw new Error(`mocha wrote no report (exit ${run.status})`);
  const json = JSON.parse(fs.readFileSync(report, 'utf8'));
  const outcome = new Map();
  for (const t of json.tests) {
    const file = path.basename(t.file);
    const key = `${file}: ${t.fullTitle}`;
    outcome.set(key, t.err && Object.keys(t.err).length ? `failed: ${t.err.message}` : 'passed');
  }
  for (const t of json.pending) outcome.set(`${path.basename(t.file)}: ${t.fullTitle}`, 'skipped');
  // A failing hook (a beforeEach's connect, an afterEach's quit) is reported among the failures
  // only, and mocha skips the rest of its describe without reporting those tests: each such
  // failure is an outcome of its own, never listed, so it fails the run.
  for (const t of json.failures) {
    const key = `${path.basename(t.file || '')}: ${t.fullTitle}`;
    if (!outcome.has(key)) outcome.set(key, `failed: ${t.err && t.err.message}`);
  }
  if (run.status !== 0 && json.failures.length === 0) {
    outcome.set('(mocha itself)', `failed: mocha exited ${run.status} with no test failing`);
  }
  return outcome;
}

function runJest(suiteDir, deps, env) {
  const report = path.join(suiteDir, 'jest-report.json');
  const config = {
    rootDir: suiteDir,
    testMatch: ['**/test/store-test.ts'],
    modulePaths: [deps],
    moduleFileExtensions: ['js', 'json', 'ts'],
    // The test imports the store from ../source/index.js: ours instead.
    moduleNameMapper: { '^\\.\\./source/index\\.js$': path.join(NODE_PKG, 'index.js') },
    transform: {
      '^.+\\.ts$': [path.join(deps, 'ts-jest'), {
        isolatedModules: true,
        tsconfig: { module: 'commonjs', target: 'es2020', esModuleInterop: true },
      }],
    },
    testTimeout: 30000,
  };
  const configFile = path.join(suiteDir, 'jest.config.json');
  fs.writeFileSync(configFile, JSON.stringify(config));
  spawnSync(process.execPath, [
    path.join(deps, 'jest', 'bin', 'jest.js'), '--config', configFile, '--ci',
    '--json', '--outputFile', report,
  ], { env, cwd: suiteDir, stdio: ['ignore', 'inherit', 'inherit'] });
  if (!fs.existsSync(report)) throw new Error('jest wrote no report');
  const json = JSON.parse(fs.readFileSync(report, 'utf8'));
  const outcome = new Map();
  for (const file of json.testResults) {
    if (file.assertionResults.length === 0) {
      outcome.set(`${path.basename(file.name)}: (the file)`, `failed: ${file.message}`);
    }
    for (const t of file.assertionResults) {
      const status = t.status === 'passed' ? 'passed'
        : t.status === 'pending' ? 'skipped'
          : `failed: ${(t.failureMessages || []).join(' ').split('\n')[0]}`;
      outcome.set(`${path.basename(file.name)}: ${t.fullName}`, status);
    }
  }
  return outcome;
}

function judge(name, commit, outcome, listed, expected) {
  const count = { pass: 0, difference: 0, FAIL: 0, skip: 0, 'PASS (listed)': 0 };
  console.log(`\n== ${name} (${commit})`);
  for (const [title, status] of outcome) {
    const failed = status.startsWith('failed');
    let mark = status === 'skipped' ? 'skip' : 'pass';
    if (failed) mark = listed.has(title) ? 'difference' : 'FAIL';
    else if (mark === 'pass' && listed.has(title)) mark = 'PASS (listed)';
    count[mark] += 1;
    console.log(`  ${mark.padEnd(13)} ${title}${failed ? `\n                ${status.slice(0, 300)}` : ''}`);
  }
  const unexpected = [...outcome].filter(([t, s]) => (s.startsWith('failed') ? !listed.has(t) : s === 'passed' && listed.has(t)))
    .map(([t]) => t);
  for (const title of listed) {
    if (!outcome.has(title)) unexpected.push(`${title} (listed, but not run)`);
    else if (outcome.get(title) === 'skipped') unexpected.push(`${title} (listed, but skipped)`);
  }
  // The pinned files hold exactly `expected` tests: fewer means some never ran.
  if (outcome.size !== expected) unexpected.push(`${outcome.size} outcomes where the pinned files hold ${expected} tests`);
  console.log(`${name}: ${outcome.size} tests, ${count.pass + count['PASS (listed)']} passed, `
    + `${count.difference + count.FAIL} failed (${count.difference} listed differences, ${count.FAIL} not listed), `
    + `${count.skip} skipped by the suite itself`);
  return unexpected;
}

async function main() {
  const opt = args();
  const deps = path.resolve(opt.deps);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ratelimit-node-upstream-'));
  const server = await startServer();
  const unexpected = [];
  try {
    const flexDir = path.join(tmp, 'rate-limiter-flexible');
    const flexCommit = extract(opt.flexible, PINNED.flexible, flexDir);
    const env = {
      ...process.env,
      UPSTREAM_SUITE_DIR: path.join(flexDir, 'test'),
      RATELIMIT_NODE_DIR: NODE_PKG,
      UPSTREAM_DEPS_DIR: deps,
      UPSTREAM_REDIS_PORT: String(server.port),
      // The suites' own requires (mocha, chai, sinon) from the pinned install.
      NODE_PATH: deps,
    };
    const listed = differences();
    unexpected.push(...judge('rate-limiter-flexible RateLimiterRedis', flexCommit,
      runMocha(flexDir, Object.keys(PINNED.flexible).filter((f) => f.endsWith('.test.js')), deps, env),
      listed['rate-limiter-flexible'] || new Set(), EXPECTED_TESTS.flexible));

    const rlrDir = path.join(tmp, 'rate-limit-redis');
    const rlrCommit = extract(opt['rate-limit-redis'], PINNED.rateLimitRedis, rlrDir);
    unexpected.push(...judge('rate-limit-redis store-test', rlrCommit,
      runJest(rlrDir, deps, { ...env, UPSTREAM_SUITE_DIR: path.join(rlrDir, 'test') }),
      listed['rate-limit-redis'] || new Set(), EXPECTED_TESTS.rateLimitRedis));
  } finally {
    await server.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  if (unexpected.length) {
    console.log(`\nnot as expected (neither passing nor a listed difference):\n  ${unexpected.join('\n  ')}`);
    process.exit(1);
  }
}

main().catch((error) => { console.error(error); process.exit(1); });

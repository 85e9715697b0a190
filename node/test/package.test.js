// The package as npm ships it: the files `npm pack` puts in the tarball, its types checked by
// TypeScript as a user's code uses them (ESM and CommonJS), and both entry points at run time.
'use strict';

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const root = path.resolve(__dirname, '..');

describe('the npm package', () => {
  it('packs the code, both entry points and their types, and nothing else', () => {
    const [pack] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json'], { cwd: root, encoding: 'utf8' }));
    const files = pack.files.map((f) => f.path).sort();
    assert.deepEqual(files, [
      'LICENSE', 'README.md', 'flexible.d.mts', 'flexible.d.ts', 'flexible.js', 'flexible.mjs',
      'index.d.mts', 'index.d.ts', 'index.js', 'index.mjs',
      'lib/express-store.js', 'lib/flexible.js', 'lib/ioredis.js', 'lib/reply.js',
      'lib/store-client.js', 'package.json',
    ]);
    const manifest = require('../package.json');
    assert.equal(manifest.license, 'MIT');
    // Each entry point needs its own library only: both peers, both optional.
    assert.deepEqual(Object.keys(manifest.peerDependencies).sort(), ['express-rate-limit', 'rate-limiter-flexible']);
    assert.deepEqual(manifest.peerDependenciesMeta, {
      'express-rate-limit': { optional: true }, 'rate-limiter-flexible': { optional: true },
    });
    assert.deepEqual(Object.keys(manifest.dependencies ?? {}), []);
    assert.deepEqual(Object.keys(manifest.exports), ['.', './flexible']);
  });

  it('its hand-written types compile against express-rate-limit’s, ioredis’s and node-redis’s', () => {
    const tsc = path.join(root, 'node_modules', '.bin', 'tsc');
    try {
      execFileSync(tsc, ['-p', path.join(__dirname, 'types')], { cwd: root, encoding: 'utf8' });
    } catch (error) {
      assert.fail(`tsc: ${error.stdout}${error.stderr}`);
    }
  });

  it('require and import give the same class, the default export included', async () => {
    const cjs = require('ratelimit-node');
    const esm = await import('ratelimit-node');
    assert.equal(esm.RedisStore, cjs.RedisStore);
    assert.equal(esm.default, cjs.RedisStore);
    assert.equal(cjs.default, cjs.RedisStore);
    assert.equal(esm.ioredisSendCommand, cjs.ioredisSendCommand);
  });

  it('TypeScript compiled to CommonJS with esModuleInterop gets the class as the default import', () => {
    // What a TypeScript (or Babel, or jest) user's build does with `import RedisStore from
    // 'ratelimit-node'`: the compiler's own output, run here.
    const ts = require('typescript');
    const { outputText } = ts.transpileModule(
      "import RedisStore, { RedisStore as Named } from 'ratelimit-node'; module.exports = { RedisStore, Named };",
      { compilerOptions: { module: ts.ModuleKind.CommonJS, esModuleInterop: true } },
    );
    const mod = { exports: {} };
    new Function('require', 'module', 'exports', outputText)(require, mod, mod.exports);
    assert.equal(mod.exports.RedisStore, require('ratelimit-node').RedisStore);
    assert.equal(mod.exports.Named, require('ratelimit-node').RedisStore);
  });

  it('ratelimit-node/flexible is rate-limiter-flexible with RateLimiterRedis replaced, from require and import', async () => {
    const upstream = require('rate-limiter-flexible');
    const cjs = require('ratelimit-node/flexible');
    const esm = await import('ratelimit-node/flexible');
    assert.deepEqual(Object.keys(cjs).sort(), Object.keys(upstream).sort());
    for (const name of Object.keys(upstream)) {
      assert.equal(esm[name], cjs[name], name);
      if (name !== 'RateLimiterRedis') assert.equal(cjs[name], upstream[name], name);
    }
    assert.notEqual(cjs.RateLimiterRedis, upstream.RateLimiterRedis);
    assert.equal(cjs.RateLimiterRedis, require('../lib/flexible').RateLimiterRedis);
    assert.equal(esm.default, cjs);
  });
});

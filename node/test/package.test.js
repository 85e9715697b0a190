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
      'LICENSE', 'README.md', 'index.d.mts', 'index.d.ts', 'index.js', 'index.mjs',
      'lib/express-store.js', 'lib/ioredis.js', 'lib/reply.js', 'package.json',
    ]);
    const manifest = require('../package.json');
    assert.equal(manifest.license, 'MIT');
    assert.ok(manifest.peerDependencies['express-rate-limit']);
    assert.deepEqual(Object.keys(manifest.dependencies ?? {}), []);
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
});

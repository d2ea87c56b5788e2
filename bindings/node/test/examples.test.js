'use strict';
// The examples in examples/node run and say what they should, from the
// source tree and from a packed tarball that carries libtq, installed with
// npm into a new project.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { PACKAGE_DIR, REPOSITORY, childEnv, queuePath, runCommand, tempDir, tq } = require('./helpers');

const EXAMPLES = path.join(REPOSITORY, 'examples', 'node');
const INSTALLED = fs.existsSync(path.join(EXAMPLES, 'node_modules', 'tq'));
const NOT_INSTALLED = INSTALLED ? false : 'examples/node/node_modules is missing: run `npm ci` there (make test-node does)';

test('the workers example drains 100 tasks with 4 workers', { skip: NOT_INSTALLED }, async () => {
  const run = await runCommand(process.execPath, [path.join(EXAMPLES, 'workers.js'), queuePath()]);
  assert.equal(run.status, 0, run.stderr);
  const [left, perWorker] = run.stdout.trim().split('\n');
  assert.equal(left, 'pending left: 0');
  const finished = JSON.parse(perWorker.replace('finished per worker: ', ''));
  assert.equal(finished.length, 4);
  assert.equal(finished.reduce((sum, n) => sum + n, 0), 100);
});

test('the HTTP service passes its self-test', { skip: NOT_INSTALLED }, async () => {
  const run = await runCommand(process.execPath, [path.join(EXAMPLES, 'httpservice.js'), '--selftest']);
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /^selftest passed: /m);
});

test('a packed tarball carrying libtq installs with npm and runs the workers example', async () => {
  // The package with its library inside, packed as `npm pack` does.
  const staging = path.join(tempDir(), 'tq');
  for (const entry of ['index.js', 'index.d.ts', 'package.json', 'lib']) {
    fs.cpSync(path.join(PACKAGE_DIR, entry), path.join(staging, entry), { recursive: true });
  }
  fs.mkdirSync(path.join(staging, 'native'));
  fs.copyFileSync(tq.libraryPath, path.join(staging, 'native', 'libtq.so'));
  const packed = await runCommand('npm', ['pack', '--silent', '--pack-destination', path.dirname(staging)], { cwd: staging });
  assert.equal(packed.status, 0, packed.stderr);
  const tarball = path.join(path.dirname(staging), packed.stdout.trim());

  const project = tempDir();
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'user', private: true }));
  const npmEnv = childEnv({ TQ_LIBRARY: undefined });
  const installed = await runCommand('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], { cwd: project, env: npmEnv });
  assert.equal(installed.status, 0, installed.stderr);
  fs.copyFileSync(path.join(EXAMPLES, 'workers.js'), path.join(project, 'workers.js'));
  const run = await runCommand(process.execPath, ['workers.js', path.join(project, 'tasks.db')], { cwd: project, env: npmEnv });
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /^pending left: 0$/m);
  const where = await runCommand(process.execPath, ['-e', 'console.log(require("tq").libraryPath)'], { cwd: project, env: npmEnv });
  assert.equal(where.stdout.trim(), path.join(fs.realpathSync(project), 'node_modules', 'tq', 'native', 'libtq.so'));
});

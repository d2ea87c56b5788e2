'use strict';
// The examples in examples/node run and say what they should, from the
// source tree (test/install.test.js runs one from a packed tarball).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { REPOSITORY, queuePath, runCommand } = require('./helpers');

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

'use strict';
// index.d.ts compiles with tsc in strict mode, accepts every use of the API
// in test/types/use.ts and refuses each misuse in test/types/misuse.ts.

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { PACKAGE_DIR, runCommand } = require('./helpers');

const TSC = path.join(PACKAGE_DIR, 'node_modules', 'typescript', 'bin', 'tsc');
const OPTIONS = ['--noEmit', '--strict', '--target', 'es2022', '--module', 'commonjs', '--types', 'node'];

test('index.d.ts type-checks the uses and refuses the misuses', async () => {
  const run = await runCommand(process.execPath, [TSC, ...OPTIONS, 'index.d.ts', 'test/types/use.ts', 'test/types/misuse.ts'], {
    cwd: PACKAGE_DIR,
  });
  assert.equal(run.status, 0, run.stdout + run.stderr);
});

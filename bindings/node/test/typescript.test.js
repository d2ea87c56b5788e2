'use strict';
// index.d.ts compiles with tsc 5 and 7 in strict mode, with and without
// @types/node: it accepts every use of the API in test/types/use.ts (and,
// with Node's types, test/types/node.ts) and refuses each misuse in
// test/types/misuse.ts.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { PACKAGE_DIR, runCommand, tempDir } = require('./helpers');

/** The compilers, by the devDependency that installs each. */
const COMPILERS = ['typescript-5', 'typescript'];
const TYPES_DIR = path.join(PACKAGE_DIR, 'test', 'types');

/** Type-checks `files` (in test/types) with the compiler `compiler` and the
 * type packages `types` (none: no @types/node); resolves to tsc's run. A
 * tsconfig.json says `types`, which tsc 5 cannot be told empty on its command line. */
async function typeCheck(compiler, files, types) {
  const config = {
    compilerOptions: {
      strict: true,
      noEmit: true,
      target: 'es2022',
      module: 'commonjs',
      types,
      typeRoots: [path.join(PACKAGE_DIR, 'node_modules', '@types')],
    },
    files: [path.join(PACKAGE_DIR, 'index.d.ts'), ...files.map((file) => path.join(TYPES_DIR, file))],
  };
  const project = path.join(tempDir(), 'tsconfig.json');
  fs.writeFileSync(project, JSON.stringify(config));
  const tsc = path.join(PACKAGE_DIR, 'node_modules', compiler, 'bin', 'tsc');
  return runCommand(process.execPath, [tsc, '--project', project]);
}

for (const compiler of COMPILERS) {
  const { version } = require(path.join(PACKAGE_DIR, 'node_modules', compiler, 'package.json'));

  test(`TypeScript ${version}: index.d.ts type-checks the uses and refuses the misuses without @types/node`, async () => {
    const run = await typeCheck(compiler, ['use.ts', 'misuse.ts'], []);
    assert.equal(run.status, 0, run.stdout + run.stderr);
  });

  test(`TypeScript ${version}: index.d.ts type-checks with @types/node, which passes Buffers`, async () => {
    const run = await typeCheck(compiler, ['use.ts', 'misuse.ts', 'node.ts'], ['node']);
    assert.equal(run.status, 0, run.stdout + run.stderr);
  });

  test(`TypeScript ${version}: without @types/node, a Node.js type in a program is an error`, async () => {
    // That the run above had no Node.js types to lean on.
    const run = await typeCheck(compiler, ['node.ts'], []);
    assert.notEqual(run.status, 0);
    assert.match(run.stdout, /Cannot find name 'Buffer'/);
  });
}

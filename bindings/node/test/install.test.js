'use strict';
// The ways a project installs the package, each into a new project with
// npm: the tarball tools/dist/node.sh packs with libtq inside, and the
// repository's folder with `npm install --install-links` beside libtq
// installed under a prefix as `make install` installs it. The package has
// no install script: nothing is built where it is installed. A plain
// `npm install <folder>` links the folder without its dependencies: that is
// refused with a message saying what to do.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { PACKAGE_DIR, REPOSITORY, childEnv, runCommand, runNode, tempDir, tq } = require('./helpers');
const native = require('../lib/native');

/** Pushes a task that waits for another, pulls both in order and prints
 * where libtq came from. */
const ROUND_TRIP = `
  const tq = require('tq');
  const queue = await tq.open(process.argv[1]);
  const parent = await queue.push({ step: 1 });
  await queue.push({ step: 2 }, { after: [parent] });
  (async () => {
    const steps = [];
    for (let task; (task = await queue.pull()); await task.finish()) steps.push(task.payload.step);
    console.log(tq.libraryPath);
    console.log(steps.join(','));
    await queue.close();
  })();
`;

const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund'];

/** A new directory holding an empty npm project, its package.json with
 * `fields` besides its name. */
function newProject(fields = {}) {
  const project = tempDir();
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'user', private: true, ...fields }));
  return project;
}

/** A copy of the package's own files (as in the source tree, without its
 * node_modules) at bindings/node under a new directory; returns it. */
function sourceCopy() {
  const copy = path.join(tempDir(), 'bindings', 'node');
  for (const entry of ['index.js', 'index.d.ts', 'package.json', 'README.md', 'lib']) {
    fs.cpSync(path.join(PACKAGE_DIR, entry), path.join(copy, entry), { recursive: true });
  }
  return copy;
}

/** A folder holding this process's libtq as tools/dist/node.sh expects it: libtq.so.VERSION. */
function libraryDir() {
  const dir = tempDir();
  const { version } = require('../package.json');
  fs.copyFileSync(fs.realpathSync(tq.libraryPath), path.join(dir, `libtq.so.${version}`));
  return dir;
}

test('tools/dist/node.sh packs libtq inside, and the tarball installs with no script and runs', async () => {
  const env = childEnv({ TQ_LIBRARY: undefined });
  const destination = path.join(tempDir(), 'node');
  const packed = await runCommand('bash', ['tools/dist/node.sh', libraryDir(), destination], { cwd: REPOSITORY, env });
  assert.equal(packed.status, 0, packed.stdout + packed.stderr);
  const { version } = require('../package.json');
  const tarball = path.join(destination, `tq-${version}.tgz`);
  assert.deepEqual(fs.readdirSync(destination), [path.basename(tarball)]);
  // Nothing was left in the source tree.
  assert.equal(fs.existsSync(path.join(PACKAGE_DIR, 'native')), false);

  const project = newProject();
  const installed = await runCommand('npm', ['install', ...NPM_FLAGS, tarball], { cwd: project, env });
  assert.equal(installed.status, 0, installed.stderr);
  const run = await runNode(ROUND_TRIP, [path.join(project, 'tasks.db')], { cwd: project, env });
  assert.equal(run.status, 0, run.stderr);
  const bundled = path.join(fs.realpathSync(project), 'node_modules', 'tq', 'native', native.PLATFORM, 'libtq.so');
  assert.deepEqual(run.stdout.trim().split('\n'), [bundled, '1,2']);
  // The workers example runs from the installed package too.
  fs.copyFileSync(path.join(REPOSITORY, 'examples', 'node', 'workers.js'), path.join(project, 'workers.js'));
  const workers = await runCommand(process.execPath, ['workers.js', path.join(project, 'workers.db')], { cwd: project, env });
  assert.equal(workers.status, 0, workers.stderr);
  assert.match(workers.stdout, /^pending left: 0$/m);
});

test('tools/dist/node.sh refuses a folder without the library, and a library that is not x86-64', async () => {
  const { version } = require('../package.json');
  const empty = tempDir();
  const missing = await runCommand('bash', ['tools/dist/node.sh', empty, path.join(tempDir(), 'out')], { cwd: REPOSITORY });
  assert.equal(missing.status, 1);
  assert.equal(missing.stderr.trim(), `tools/dist/node.sh: no ${empty}/libtq.so.${version}`);

  const text = tempDir();
  fs.writeFileSync(path.join(text, `libtq.so.${version}`), 'not a library, but long enough to have a header');
  const refused = await runCommand('bash', ['tools/dist/node.sh', text, path.join(tempDir(), 'out')], { cwd: REPOSITORY });
  assert.equal(refused.status, 1);
  assert.match(refused.stderr, /^tools\/dist\/node\.sh: \S+ is not an x86-64 ELF library/m);
});

test('npm install --install-links of the folder, with libtq installed under a prefix, runs', async () => {
  // The libraries as `make install` puts them in PREFIX/lib: libtq.so.VERSION
  // and its links.
  const libdir = path.join(tempDir(), 'usr', 'lib');
  fs.mkdirSync(libdir, { recursive: true });
  const built = path.dirname(tq.libraryPath);
  for (const name of fs.readdirSync(built).filter((entry) => entry.startsWith('libtq.so'))) {
    const from = path.join(built, name);
    if (fs.lstatSync(from).isSymbolicLink()) fs.symlinkSync(fs.readlinkSync(from), path.join(libdir, name));
    else fs.copyFileSync(from, path.join(libdir, name));
  }
  const env = childEnv({ TQ_LIBRARY: undefined, LD_LIBRARY_PATH: libdir });
  const project = newProject();
  const installed = await runCommand('npm', ['install', '--install-links', ...NPM_FLAGS, PACKAGE_DIR], { cwd: project, env });
  assert.equal(installed.status, 0, installed.stderr);
  // A copy with koffi beside it, not a link to the folder.
  assert.equal(fs.lstatSync(path.join(project, 'node_modules', 'tq')).isSymbolicLink(), false);
  const run = await runNode(ROUND_TRIP, [path.join(project, 'tasks.db')], { cwd: project, env });
  assert.equal(run.status, 0, run.stderr);
  assert.deepEqual(run.stdout.trim().split('\n'), [native.SONAME, '1,2']);
});

test('a folder linked by a plain npm install, without koffi, says how to install it', async () => {
  const copy = sourceCopy();
  const project = newProject();
  const env = childEnv({ TQ_LIBRARY: undefined });
  const installed = await runCommand('npm', ['install', ...NPM_FLAGS, copy], { cwd: project, env });
  assert.equal(installed.status, 0, installed.stderr);
  assert.equal(fs.lstatSync(path.join(project, 'node_modules', 'tq')).isSymbolicLink(), true);
  const run = await runNode("require('tq')", [], { cwd: project, env });
  assert.equal(run.status, 1);
  const message = run.stderr.split('\n').find((line) => line.startsWith('Error: '));
  assert.equal(
    message,
    `Error: tq: koffi, which tq loads libtq with, is not installed where ${fs.realpathSync(copy)} can find it. ` +
      '`npm install <folder>` links a folder without installing its dependencies: ' +
      'install tq with `npm install --install-links <folder>` (or from a tarball), or run `npm ci` in the folder.',
  );
});

'use strict';
// The ways a project installs the package, each into a new project with
// npm: a tarball from `npm pack`, whose prepack script puts libtq inside;
// the repository's folder itself with `npm install --install-links`, whose
// install script builds libtq with cargo and puts it inside, or, with no
// scripts run, with libtq installed under a prefix as `make install`
// installs it. A plain `npm install <folder>` links the folder without its
// dependencies: that is refused with a message saying what to do.

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
  for (const entry of ['index.js', 'index.d.ts', 'package.json', 'README.md', 'lib', 'scripts']) {
    fs.cpSync(path.join(PACKAGE_DIR, entry), path.join(copy, entry), { recursive: true });
  }
  return copy;
}

test('npm pack in the repository carries libtq built by cargo, and the tarball installs and runs', async () => {
  // cargo builds as `make lib` does, which test-node ran first: nothing is rebuilt.
  const env = childEnv({ TQ_LIBRARY: undefined });
  const destination = tempDir();
  const packed = await runCommand('npm', ['pack', '--silent', '--pack-destination', destination], { cwd: PACKAGE_DIR, env });
  assert.equal(packed.status, 0, packed.stderr);
  assert.match(packed.stderr, /^tq: building libtq: cargo rustc --release --locked --lib /m);
  assert.match(packed.stderr, /^tq: packing \S+\/libtq\.so as native\/libtq\.so$/m);
  // postpack removed the copy from the folder.
  assert.equal(fs.existsSync(path.join(PACKAGE_DIR, 'native')), false);
  const tarball = path.join(destination, packed.stdout.trim().split('\n').pop());

  const project = newProject();
  const installed = await runCommand('npm', ['install', ...NPM_FLAGS, tarball], { cwd: project, env });
  assert.equal(installed.status, 0, installed.stderr);
  const run = await runNode(ROUND_TRIP, [path.join(project, 'tasks.db')], { cwd: project, env });
  assert.equal(run.status, 0, run.stderr);
  const bundled = path.join(fs.realpathSync(project), 'node_modules', 'tq', 'native', 'libtq.so');
  assert.deepEqual(run.stdout.trim().split('\n'), [bundled, '1,2']);
  // The workers example runs from the installed package too.
  fs.copyFileSync(path.join(REPOSITORY, 'examples', 'node', 'workers.js'), path.join(project, 'workers.js'));
  const workers = await runCommand(process.execPath, ['workers.js', path.join(project, 'workers.db')], { cwd: project, env });
  assert.equal(workers.status, 0, workers.stderr);
  assert.match(workers.stdout, /^pending left: 0$/m);
});

test('packing takes TQ_LIBRARY first, and refuses to pack without a library', async () => {
  const copy = sourceCopy();
  const named = path.join(tempDir(), 'chosen-libtq.so');
  fs.copyFileSync(tq.libraryPath, named);
  const script = path.join(copy, 'scripts', 'library.js');
  const chosen = await runCommand(process.execPath, [script, 'prepack'], { env: childEnv({ TQ_LIBRARY: named }) });
  assert.equal(chosen.status, 0, chosen.stderr);
  assert.equal(fs.readFileSync(path.join(copy, 'native', 'libtq.so')).equals(fs.readFileSync(named)), true);
  assert.equal((await runCommand(process.execPath, [script, 'postpack'])).status, 0);
  assert.equal(fs.existsSync(path.join(copy, 'native')), false);

  const missing = path.join(tempDir(), 'nowhere.so');
  const refused = await runCommand(process.execPath, [script, 'prepack'], { env: childEnv({ TQ_LIBRARY: missing }) });
  assert.equal(refused.status, 1);
  assert.equal(refused.stderr.trim(), `tq: TQ_LIBRARY=${JSON.stringify(missing)} does not exist; nothing was packed`);
  // Neither TQ_LIBRARY nor a repository around the folder for cargo to build.
  const none = await runCommand(process.execPath, [script, 'prepack'], { env: childEnv({ TQ_LIBRARY: undefined }) });
  assert.equal(none.status, 1);
  assert.equal(
    none.stderr.trim(),
    `tq: no libtq to pack: TQ_LIBRARY is not set and ${copy} is not a repository's bindings/node ` +
      'for cargo to build libtq from. Set TQ_LIBRARY to the libtq.so the package is to carry.',
  );
  assert.equal(fs.existsSync(path.join(copy, 'native')), false);
});

test('npm install --install-links of the repository folder builds libtq into the package', async () => {
  // npm runs a dependency's install script only once the project allows it
  // (allowScripts names a folder by its file: spec); older npm runs it anyway.
  const project = newProject({ allowScripts: { [`file:${PACKAGE_DIR}`]: true } });
  const env = childEnv({ TQ_LIBRARY: undefined });
  const installed = await runCommand('npm', ['install', '--install-links', ...NPM_FLAGS, PACKAGE_DIR], { cwd: project, env });
  assert.equal(installed.status, 0, installed.stderr);
  const run = await runNode(ROUND_TRIP, [path.join(project, 'tasks.db')], { cwd: project, env });
  assert.equal(run.status, 0, run.stderr);
  const bundled = path.join(fs.realpathSync(project), 'node_modules', 'tq', 'native', 'libtq.so');
  assert.deepEqual(run.stdout.trim().split('\n'), [bundled, '1,2']);
  // The built library went into the project, not into the folder.
  assert.equal(fs.existsSync(path.join(PACKAGE_DIR, 'native')), false);
});

test('the install script builds nothing where there is no repository to build', async () => {
  const copy = sourceCopy();
  const script = path.join(copy, 'scripts', 'library.js');
  const env = childEnv({ TQ_LIBRARY: undefined, npm_package_resolved: `file:${copy}` });
  const skipped = await runCommand(process.execPath, [script, 'install'], { env });
  assert.equal(skipped.status, 0, skipped.stderr);
  assert.equal(
    skipped.stderr.trim(),
    'tq: the package carries no libtq and was not installed from a repository folder to build it from: ' +
      'it loads libtq from TQ_LIBRARY or the system (`make install`)',
  );
  assert.equal(fs.existsSync(path.join(copy, 'native')), false);
});

test('npm install --install-links of the folder, with no scripts run and libtq installed under a prefix, runs', async () => {
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
  const installed = await runCommand('npm', ['install', '--install-links', '--ignore-scripts', ...NPM_FLAGS, PACKAGE_DIR], {
    cwd: project,
    env,
  });
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

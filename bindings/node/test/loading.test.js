'use strict';
// Where the package finds libtq: TQ_LIBRARY, else the copy inside the
// package, else the system's search path; and the errors when it cannot.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { PACKAGE_DIR, childEnv, runNode, tempDir, tq } = require('./helpers');
const native = require('../lib/native');

const REPORT = `const tq = require(process.argv[1]); console.log(tq.libraryPath); console.log(tq.libraryVersion());`;

/** A copy of the package in a new directory, carrying libtq as
 * native/PLATFORM/libtq.so for the platform `platform` (none: no copy);
 * returns its directory. */
function packageCopy(platform) {
  const copy = path.join(tempDir(), 'tq');
  fs.mkdirSync(copy);
  for (const entry of ['index.js', 'package.json', 'lib']) {
    fs.cpSync(path.join(PACKAGE_DIR, entry), path.join(copy, entry), { recursive: true });
  }
  fs.symlinkSync(path.join(PACKAGE_DIR, 'node_modules'), path.join(copy, 'node_modules'));
  if (platform) {
    fs.mkdirSync(path.join(copy, 'native', platform), { recursive: true });
    fs.copyFileSync(tq.libraryPath, path.join(copy, 'native', platform, 'libtq.so'));
  }
  return copy;
}

/** The last line of a child's stderr that names the error. */
function errorLine(stderr) {
  return stderr.split('\n').find((line) => line.startsWith('Error: '));
}

test('TQ_LIBRARY names the library', async () => {
  const library = path.join(tempDir(), 'renamed-libtq.so');
  fs.copyFileSync(tq.libraryPath, library);
  const run = await runNode(REPORT, [PACKAGE_DIR], { env: childEnv({ TQ_LIBRARY: library }) });
  assert.equal(run.status, 0, run.stderr);
  assert.deepEqual(run.stdout.split('\n').slice(0, 2), [library, '0.3.0']);
});

test('the copy inside the package is used without TQ_LIBRARY, and TQ_LIBRARY wins over it', async () => {
  const copy = packageCopy(native.PLATFORM);
  const code = `${REPORT} const q = await tq.open(process.argv[2]); await q.push(1); console.log(await q.count());`;
  const run = await runNode(code, [copy, path.join(tempDir(), 'q.db')], { env: childEnv({ TQ_LIBRARY: undefined }) });
  assert.equal(run.status, 0, run.stderr);
  assert.deepEqual(run.stdout.split('\n').slice(0, 3), [path.join(copy, 'native', native.PLATFORM, 'libtq.so'), '0.3.0', '1']);
  const chosen = path.join(tempDir(), 'chosen.so');
  fs.copyFileSync(tq.libraryPath, chosen);
  const named = await runNode(REPORT, [copy], { env: childEnv({ TQ_LIBRARY: chosen }) });
  assert.equal(named.stdout.split('\n')[0], chosen);
});

test('the system search path finds the library by its SONAME', async () => {
  const copy = packageCopy(null);
  const libdir = tempDir();
  fs.symlinkSync(fs.realpathSync(tq.libraryPath), path.join(libdir, 'libtq.so.0.3'));
  const run = await runNode(REPORT, [copy], { env: childEnv({ TQ_LIBRARY: undefined, LD_LIBRARY_PATH: libdir }) });
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout.split('\n')[0], 'libtq.so.0.3');
});

test('a TQ_LIBRARY that cannot be loaded is an error naming all three places', async () => {
  const copy = packageCopy(native.PLATFORM);
  const missing = path.join(tempDir(), 'nowhere', 'libtq.so');
  const run = await runNode(REPORT, [copy], { env: childEnv({ TQ_LIBRARY: missing }) });
  assert.equal(run.status, 1);
  const message = errorLine(run.stderr);
  assert.ok(message.startsWith(`Error: tq: cannot load libtq from TQ_LIBRARY=${JSON.stringify(missing)}: `), message);
  assert.match(message, /No such file/);
  // It is not replaced by the copy in the package; the other places are named.
  assert.ok(message.includes(`copy inside the package (${path.join(copy, 'native', native.PLATFORM, 'libtq.so')})`), message);
  assert.ok(message.includes("system's library search path (libtq.so.0.3)"), message);
});

/** Requires the package at argv[1] in a child whose koffi refuses to load
 * the SONAME, as the dynamic loader does when the system has no libtq. */
const WITHOUT_SYSTEM_LIBRARY = `
    const koffi = require(require.resolve('koffi', { paths: [process.argv[1]] }));
    const load = koffi.load;
    koffi.load = (name, ...rest) => {
      if (name === 'libtq.so.0.3') throw new Error('libtq.so.0.3: cannot open shared object file: No such file or directory');
      return load(name, ...rest);
    };
    require(process.argv[1]);
`;

/** The error of a package at `copy` that finds no libtq, the copy inside it told by `bundled`. */
function notFound(copy, bundled) {
  return (
    `Error: tq: libtq was not found for ${native.PLATFORM}. Looked in the TQ_LIBRARY environment variable: not set; ` +
    `the copy inside the package (${path.join(copy, 'native', native.PLATFORM, 'libtq.so')}): ${bundled}; ` +
    "the system's library search path (libtq.so.0.3): libtq.so.0.3: cannot open shared object file: No such file or directory. " +
    `Build it for ${native.PLATFORM} with \`make lib\` in tq's repository and set TQ_LIBRARY to the library in build/lib, ` +
    'install a package that carries it, or install libtq with `make install`.'
  );
}

test('no library anywhere is an error naming all three places', async () => {
  const copy = packageCopy(null);
  const run = await runNode(WITHOUT_SYSTEM_LIBRARY, [copy], { env: childEnv({ TQ_LIBRARY: undefined }) });
  assert.equal(run.status, 1);
  assert.equal(errorLine(run.stderr), notFound(copy, 'not present'));
});

test('a package carrying libtq for another platform only says which platforms it carries', async () => {
  const other = native.PLATFORM === 'linux-x64' ? 'darwin-arm64' : 'linux-x64';
  const copy = packageCopy(other);
  const run = await runNode(WITHOUT_SYSTEM_LIBRARY, [copy], { env: childEnv({ TQ_LIBRARY: undefined }) });
  assert.equal(run.status, 1);
  assert.equal(errorLine(run.stderr), notFound(copy, `the package carries libtq for ${other} only, and this is ${native.PLATFORM}`));
  // TQ_LIBRARY still wins there.
  const named = await runNode(REPORT, [copy], { env: childEnv({ TQ_LIBRARY: tq.libraryPath }) });
  assert.equal(named.status, 0, named.stderr);
  assert.equal(named.stdout.split('\n')[0], tq.libraryPath);
});

test('a library that is not libtq is refused', async () => {
  const run = await runNode(REPORT, [PACKAGE_DIR], { env: childEnv({ TQ_LIBRARY: 'libc.so.6' }) });
  assert.equal(run.status, 1);
  assert.match(errorLine(run.stderr), /^Error: tq: libc.so.6 cannot give tq_last_error \(.*\); it is not libtq 0\.3$/);
});

test('a library of another ABI version is refused; a patch release is the same ABI', () => {
  const library = (major, minor, patch) => ({
    tq_version_number: () => major * 10000 + minor * 100 + patch,
    tq_version: () => `${major}.${minor}.${patch}`,
  });
  native.checkVersion(library(0, 3, 7), 'here');
  for (const other of [
    [0, 2, 0],
    [0, 4, 0],
    [1, 3, 0],
  ]) {
    assert.throws(
      () => native.checkVersion(library(...other), '/opt/libtq.so'),
      new Error(`tq: the libtq loaded from /opt/libtq.so is version ${other.join('.')}, but this package is written for the ABI of libtq 0.3`),
    );
  }
});

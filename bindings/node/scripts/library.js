'use strict';
// Puts libtq inside the package as native/libtq.so, which lib/native.js
// loads when TQ_LIBRARY is not set. npm runs it at three points:
//
// - `prepack` (npm pack, npm publish): the library named by TQ_LIBRARY, else
//   one cargo builds from the repository the folder sits in, is copied in;
// - `postpack`: the copy is removed, so that the source tree never loads a
//   stale library of its own;
// - `install`, in the project that installs the package: when the package
//   carries no library and TQ_LIBRARY is not set, and it was installed from
//   a repository's folder (`npm install --install-links ./bindings/node`),
//   cargo builds that repository's libtq and it is copied in. In the
//   repository's own folder (`npm ci` there) nothing is done: the source
//   tree loads build/lib's through TQ_LIBRARY.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const PACKAGE_DIR = path.resolve(__dirname, '..');
const NATIVE_DIR = path.join(PACKAGE_DIR, 'native');
const BUNDLED = path.join(NATIVE_DIR, 'libtq.so');

/** The repository holding the package folder `dir` (as its bindings/node),
 * or null when `dir` is not inside one. */
function repositoryOf(dir) {
  const root = path.resolve(dir, '..', '..');
  const isRepository = ['Cargo.toml', 'include/tq.h'].every((file) => fs.existsSync(path.join(root, file)));
  return isRepository ? root : null;
}

/** Builds libtq in `repository` with cargo as `make lib` does (the same
 * command, so that the two share one build) and returns the built file. */
function build(repository) {
  const cargo = process.env.CARGO || 'cargo';
  const args = ['rustc', '--release', '--locked', '--lib', '--message-format=json-render-diagnostics'];
  args.push('--manifest-path', path.join(repository, 'Cargo.toml'), '--', '--print', 'native-static-libs');
  console.error(`tq: building libtq: ${cargo} ${args.join(' ')}`);
  const result = spawnSync(cargo, args, {
    cwd: repository,
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  if (result.error) {
    throw new Error(`tq: cannot run ${cargo} to build libtq (${result.error.message}): install Rust 1.89 or later`);
  }
  if (result.status !== 0) throw new Error(`tq: ${cargo} failed to build libtq in ${repository}`);
  // cargo names its artifacts in JSON messages, one per line.
  for (const line of result.stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    const message = JSON.parse(line);
    if (message.reason !== 'compiler-artifact' || !message.target.kind.includes('cdylib')) continue;
    const library = message.filenames.find((file) => file.endsWith('.so'));
    if (library) return library;
  }
  throw new Error(`tq: ${cargo} built no libtq.so in ${repository}`);
}

/** Copies `library` (the file itself, not a symbolic link to it) to native/libtq.so. */
function bundle(library) {
  fs.mkdirSync(NATIVE_DIR, { recursive: true });
  fs.copyFileSync(fs.realpathSync(library), BUNDLED);
  console.error(`tq: packing ${fs.realpathSync(library)} as native/libtq.so`);
}

function prepack() {
  const named = process.env.TQ_LIBRARY;
  if (named) {
    if (!fs.existsSync(named)) {
      throw new Error(`tq: TQ_LIBRARY=${JSON.stringify(named)} does not exist; nothing was packed`);
    }
    bundle(named);
    return;
  }
  const repository = repositoryOf(PACKAGE_DIR);
  if (!repository) {
    throw new Error(
      `tq: no libtq to pack: TQ_LIBRARY is not set and ${PACKAGE_DIR} is not a repository's bindings/node ` +
        'for cargo to build libtq from. Set TQ_LIBRARY to the libtq.so the package is to carry.',
    );
  }
  bundle(build(repository));
}

function postpack() {
  fs.rmSync(NATIVE_DIR, { recursive: true, force: true });
}

/** The folder npm installed the package from, when it was one: npm names
 * it in npm_package_resolved as file:PATH. */
function installedFrom() {
  const resolved = process.env.npm_package_resolved || '';
  if (!resolved.startsWith('file:')) return null;
  return path.resolve(process.env.INIT_CWD || process.cwd(), resolved.slice('file:'.length));
}

function install() {
  if (fs.existsSync(BUNDLED) || process.env.TQ_LIBRARY || repositoryOf(PACKAGE_DIR)) return;
  const source = installedFrom();
  const repository = source && repositoryOf(source);
  if (!repository) {
    console.error(
      'tq: the package carries no libtq and was not installed from a repository folder to build it from: ' +
        'it loads libtq from TQ_LIBRARY or the system (`make install`)',
    );
    return;
  }
  bundle(build(repository));
}

const steps = { prepack, postpack, install };
const step = steps[process.argv[2]];
if (!step) {
  console.error(`usage: node scripts/library.js ${Object.keys(steps).join('|')}`);
  process.exit(2);
}
try {
  step();
} catch (error) {
  console.error(error.message);
  process.exit(1);
}

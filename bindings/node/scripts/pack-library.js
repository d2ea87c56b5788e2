'use strict';
// `npm pack` and `npm publish` run this before packing (`prepack`) and
// after (`postpack`): the package carries libtq as native/libtq.so, which
// lib/native.js loads when TQ_LIBRARY is not set. Before packing, the
// library named by TQ_LIBRARY, else the source tree's build/lib/libtq.so
// (`make lib`), is copied there; after packing, the copy is removed, so
// that the source tree never loads a stale library of its own.

const fs = require('node:fs');
const path = require('node:path');

const PACKAGE_DIR = path.resolve(__dirname, '..');
const NATIVE_DIR = path.join(PACKAGE_DIR, 'native');
const BUNDLED = path.join(NATIVE_DIR, 'libtq.so');
const BUILT = path.join(PACKAGE_DIR, '..', '..', 'build', 'lib', 'libtq.so');

/** The library to pack: TQ_LIBRARY's path, else the source tree's build. */
function source() {
  const named = process.env.TQ_LIBRARY;
  if (named) {
    if (!fs.existsSync(named)) {
      throw new Error(`tq: TQ_LIBRARY=${JSON.stringify(named)} does not exist; nothing was packed`);
    }
    return named;
  }
  if (fs.existsSync(BUILT)) return BUILT;
  throw new Error(
    `tq: no libtq to pack: TQ_LIBRARY is not set and ${BUILT} does not exist. ` +
      'Run `make lib` (or `make pack-node`), or set TQ_LIBRARY to the libtq.so the package is to carry.',
  );
}

function prepack() {
  const library = source();
  fs.mkdirSync(NATIVE_DIR, { recursive: true });
  // The file itself, not a symbolic link to it (build/lib/libtq.so is one).
  fs.copyFileSync(fs.realpathSync(library), BUNDLED);
  console.error(`tq: packing ${fs.realpathSync(library)} as native/libtq.so`);
}

function postpack() {
  fs.rmSync(NATIVE_DIR, { recursive: true, force: true });
}

const steps = { prepack, postpack };
const step = steps[process.argv[2]];
if (!step) {
  console.error(`usage: node scripts/pack-library.js ${Object.keys(steps).join('|')}`);
  process.exit(2);
}
try {
  step();
} catch (error) {
  console.error(error.message);
  process.exit(1);
}

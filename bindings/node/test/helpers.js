'use strict';
// Test setup: every test gets a fresh queue file in its own temporary
// directory; children run this source tree's package with the same library.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');

const PACKAGE_DIR = path.resolve(__dirname, '..');
const REPOSITORY = path.resolve(PACKAGE_DIR, '..', '..');
const tq = require(PACKAGE_DIR);

/** The directories tempDir made, removed when the process exits (by one
 * listener: a listener each would pass Node's warning limit of ten). */
const tempDirs = [];
process.on('exit', () => {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

/** A new temporary directory, removed when the process exits. */
function tempDir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-node-'));
  tempDirs.push(dir);
  return dir;
}

/** The path of a queue file that does not exist yet. */
function queuePath() {
  return path.join(tempDir(), 'queue.db');
}

/** Runs `fn(queue)` on a queue opened on a new file, closing it after. */
async function withQueue(fn, options) {
  const queue = await tq.open(queuePath(), options);
  try {
    return await fn(queue);
  } finally {
    await queue.close();
  }
}

/** The environment of a child: this process's, with `changes` applied
 * (undefined removes a variable) and the library this process loaded. */
function childEnv(changes = {}) {
  const env = { ...process.env, TQ_LIBRARY: tq.libraryPath };
  for (const [name, value] of Object.entries(changes)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

/** Runs `node -e code args...`; resolves to { status, signal, stdout, stderr }.
 * Code that awaits runs in an async function (a rejection ends the child
 * as an uncaught exception would). */
function runNode(code, args = [], options = {}) {
  const script = code.includes('await ') ? `(async () => {\n${code}\n})();` : code;
  return runCommand(process.execPath, ['-e', script, '--', ...args], options);
}

/** Runs a command; resolves to { status, signal, stdout, stderr }. With
 * `killAfter` (ms), a command still running then is killed (signal SIGKILL). */
function runCommand(command, args, { env = childEnv(), cwd, killAfter } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const killer = killAfter && setTimeout(() => child.kill('SIGKILL'), killAfter);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (status, signal) => {
      clearTimeout(killer);
      resolve({ status, signal, stdout, stderr });
    });
  });
}

/** Runs `fn()` counting the asynchronous calls of each C function; resolves
 * to [what fn resolves to, the counts by C name]. */
async function countingCalls(fn) {
  const { lib } = require('../lib/native');
  const counts = {};
  const real = { ...lib };
  for (const [name, func] of Object.entries(real)) {
    lib[name] = Object.assign((...args) => func(...args), {
      info: func.info,
      async: (...args) => {
        counts[name] = (counts[name] ?? 0) + 1;
        return func.async(...args);
      },
    });
  }
  try {
    return [await fn(), counts];
  } finally {
    Object.assign(lib, real);
  }
}

module.exports = { PACKAGE_DIR, REPOSITORY, childEnv, countingCalls, queuePath, runCommand, runNode, tempDir, tq, withQueue };

'use strict';
// tq's SQLite extension from Node.js: better-sqlite3 loads libtq_sqlite.so
// (db.loadExtension), commits an order and its task in one transaction
// and rolls back another; tq's worker, in another process, gets exactly
// the committed task and finishes it by its receipt in the same commit as
// a receipt row.

const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const test = require('node:test');
const Database = require('better-sqlite3');

const EXTENSION = process.env.TQ_SQLITE_EXTENSION;
const SQLITE_VERSION = new Database(':memory:').prepare('SELECT sqlite_version()').pluck().get();
const skip = !EXTENSION
  ? 'TQ_SQLITE_EXTENSION is not set (make test-ext sets it to the extension make ext builds)'
  : SQLITE_VERSION.split('.').map(Number).reduce((n, part) => n * 1000 + part) < 3051003
    ? `better-sqlite3's SQLite is ${SQLITE_VERSION}; tq's extension needs 3.51.3 or later`
    : false;

// Run by the worker: waits (long: the commit ends the wait) for a task of
// the queue "emails", prints its payload, finishes it in SQL with a
// receipt row in one commit, and prints "empty" when no other is ready.
const WORKER = `
const tq = require('tq');
const Database = require('better-sqlite3');
(async () => {
  const [path, extension] = process.argv.slice(1);
  const queue = await tq.open(path, { queue: 'emails' });
  console.log('ready');
  const task = await queue.pull({ wait: 120000 });
  console.log(task.raw);
  const db = new Database(path);
  db.loadExtension(extension);
  // better-sqlite3 binds a Number as a REAL, which tq_finish refuses as
  // an id: the id goes as a BigInt, as the token is.
  const id = BigInt(task.id);
  db.transaction(() => {
    db.prepare('INSERT INTO receipts (task) VALUES (?)').run(id);
    db.prepare('SELECT tq_finish(?, ?)').get(id, task.token);
  })();
  db.close();
  console.log((await queue.pull()) === null ? 'empty' : 'another task');
  await queue.close();
})().catch((error) => { console.error(error); process.exit(1); });
`;

/** Inserts an order and pushes its receipt email in one transaction, then
 * commits it or rolls it back. */
function placeOrder(db, order, commit) {
  db.exec('BEGIN IMMEDIATE');
  db.prepare('INSERT INTO orders (id, total) VALUES (?, 100)').run(order);
  db.prepare("SELECT tq_push('emails', json_object('order', ?))").get(order);
  db.exec(commit ? 'COMMIT' : 'ROLLBACK');
}

function shop() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-ext-node-'));
  test.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'shop.db');
  const db = new Database(file);
  db.loadExtension(EXTENSION);
  db.exec('CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER NOT NULL);' +
    'CREATE TABLE receipts (task INTEGER PRIMARY KEY)');
  return { db, file };
}

test('a worker in another process gets exactly the committed task', { skip }, async () => {
  const { db, file } = shop();
  placeOrder(db, 2, false);
  const worker = spawn(process.execPath, ['-e', WORKER, file, EXTENSION], {
    cwd: __dirname,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise((resolve) => worker.on('exit', resolve));
  const lines = readline.createInterface({ input: worker.stdout })[Symbol.asyncIterator]();
  const next = async () => (await lines.next()).value;
  try {
    assert.strictEqual(await next(), 'ready');
    // The worker is waiting: this commit wakes it.
    placeOrder(db, 1, true);
    assert.deepStrictEqual(JSON.parse(await next()), { order: 1 });
    assert.strictEqual(await next(), 'empty');
    assert.strictEqual(await exited, 0);
  } finally {
    worker.kill();
  }
  assert.deepStrictEqual(db.prepare('SELECT id FROM orders').pluck().all(), [1]);
  assert.strictEqual(db.prepare('SELECT count(*) FROM receipts').pluck().get(), 1);
  db.close();
});

test("a bad payload fails with tq's message", { skip }, () => {
  const { db } = shop();
  assert.throws(() => db.prepare("SELECT tq_push('emails', '{not json')").get(), /^SqliteError: tq_push: /);
  db.close();
});

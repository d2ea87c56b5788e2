'use strict';
// The PostgreSQL-only options: refused on an SQLite file; a URL's password
// kept out of messages; and round trips (a waiting pull woken by a push,
// results, schedules, dependencies and groups) on the server
// TQ_TEST_POSTGRES_URL names (`make test-postgres` starts one).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { queuePath, tq } = require('./helpers');

const POSTGRES_URL = process.env.TQ_TEST_POSTGRES_URL;
const SKIP = POSTGRES_URL ? false : 'TQ_TEST_POSTGRES_URL is not set (`make test-postgres` starts a server)';
const POSTGRES_DIR = process.env.TQ_TEST_POSTGRES_DIR;
// Refused before any connection, so no server is needed: nothing listens on port 1.
const NO_SERVER = 'postgres://nobody@127.0.0.1:1/none';

// Restarts the test server at once, dropping every connection (its data
// directory is TQ_TEST_POSTGRES_DIR).
function restartServer() {
  const cluster = path.join(__dirname, '..', '..', '..', 'tests', 'postgres', 'cluster.sh');
  execFileSync(cluster, ['restart', POSTGRES_DIR, 'immediate'], { stdio: 'ignore' });
}

test('the PostgreSQL options are refused on an SQLite file', async () => {
  const path = queuePath();
  // Refused by tq_open on a worker thread, which keeps the library's message.
  await assert.rejects(() => tq.open(path, { poolSize: 2 }), { name: 'InvalidArgumentError', message: /^tq_open / });
  await assert.rejects(() => tq.open(path, { postgresSchema: 'jobs' }), { name: 'InvalidArgumentError', message: /^tq_open / });
  // openSync, on the calling thread, gives it.
  assert.throws(() => tq.openSync(path, { poolSize: 2 }), { name: 'InvalidArgumentError', message: /pool size applies to PostgreSQL only/ });
  assert.equal(fs.existsSync(path), false);
});

test('bad PostgreSQL option values are refused', async () => {
  for (const [options, error, message] of [
    [{ poolSize: 0 }, tq.InvalidArgumentError, /pool size/],
    [{ poolSize: tq.MAX_POOL_SIZE + 1 }, tq.InvalidArgumentError, /pool size/],
    [{ poolSize: -1 }, tq.InvalidArgumentError, /poolSize must be between/],
    [{ poolSize: '2' }, TypeError, /poolSize must be an integer/],
    [{ postgresSchema: 'pg_jobs' }, tq.InvalidArgumentError, /not a schema name/],
    [{ postgresSchema: 'a\0b' }, tq.InvalidArgumentError, /contains a NUL character/],
    [{ postgresSchema: 7 }, TypeError, /postgresSchema must be a string/],
  ]) {
    await assert.rejects(async () => tq.open(NO_SERVER, options), (thrown) => thrown instanceof error && message.test(thrown.message));
  }
});

test('PostgreSQL: push, pull, finish, and a push waking a waiting pull', { skip: SKIP }, async () => {
  const schema = `node_test_${process.pid}_${Date.now()}`;
  const queue = await tq.open(POSTGRES_URL, { postgresSchema: schema, poolSize: 2 });
  const other = await tq.open(POSTGRES_URL, { postgresSchema: `${schema}_other` });
  try {
    const first = await queue.push({ n: 1 });
    // Another schema of the same database holds other queues.
    assert.equal((await other.counts()).pending, 0);
    assert.deepEqual(await queue.counts(), { pending: 1, leased: 0, done: 0, dead: 0, cancelled: 0 });
    const task = await queue.pull();
    assert.equal(task.id, first);
    assert.deepEqual(task.payload, { n: 1 });
    await task.finish();
    const waiting = queue.pull({ wait: 120_000 });
    setImmediate(() => other.close().then(() => queue.push({ n: 2 })));
    const woken = await waiting;
    assert.deepEqual(woken.payload, { n: 2 });
    await woken.finish();
    await assert.rejects(async () => queue.checkpoint(), tq.InvalidArgumentError);
    assert.deepEqual(await queue.counts(), { pending: 0, leased: 0, done: 0, dead: 0, cancelled: 0 });
  } finally {
    await Promise.all([queue.close(), other.close()]);
  }
});

test('PostgreSQL: progress, a result and a wait for it', { skip: SKIP }, async () => {
  const schema = `node_test_${process.pid}_${Date.now()}_results`;
  const queue = await tq.open(POSTGRES_URL, { postgresSchema: schema, resultRetention: 3_600_000 });
  try {
    const id = await queue.push({ n: 1 });
    const task = await queue.pull();
    await task.extend(60_000, { progress: { step: 1 } });
    assert.deepEqual((await queue.task(id)).progress, { step: 1 });
    const waiting = queue.wait(id, { timeout: 10_000 });
    setTimeout(() => task.finish({ result: { ok: true } }), 100);
    const ended = await waiting;
    assert.equal(ended.state, 'done');
    assert.deepEqual(ended.result, { ok: true });
  } finally {
    await queue.close();
  }
});

test('PostgreSQL: a due schedule, a child released after its parent, a group one at a time', { skip: SKIP }, async () => {
  const schema = `node_test_${process.pid}_${Date.now()}_graphs`;
  const queue = await tq.open(POSTGRES_URL, { postgresSchema: schema });
  try {
    await queue.addSchedule('often', { tick: true }, { every: 20, priority: 2 });
    await assert.rejects(async () => queue.addSchedule('bad', 1, { cron: '* * * * *', timeZone: 'Mars/Olympus' }), tq.InvalidArgumentError);
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.equal(await queue.runDueSchedules(), 1);
    await queue.removeSchedule('often');
    assert.deepEqual(await queue.schedules(), []);
    const tick = await queue.pull();
    assert.deepEqual([tick.payload, tick.priority], [{ tick: true }, 2]);
    await tick.finish();

    const [parent, child] = await queue.pushItems([{ payload: '"parent"' }, { payload: '"child"', afterItems: [0] }]);
    assert.deepEqual((await queue.task(child)).waitingFor, [parent]);
    await assert.rejects(async () => queue.push(1, { after: [child + 1000] }), tq.InvalidArgumentError);
    const first = await queue.pull();
    assert.equal(first.id, parent);
    assert.equal(await queue.pull(), null);
    await first.finish();
    const released = await queue.pull();
    assert.deepEqual([released.id, released.parents], [child, [parent]]);
    await released.finish();

    const grouped = await queue.pushMany(['"g1"', '"g2"'], { group: 'g' });
    assert.equal((await queue.task(grouped[1])).group, 'g');
    const g1 = await queue.pull();
    assert.equal(g1.payload, 'g1');
    assert.equal(await queue.pull(), null);
    await g1.finish();
    const g2 = await queue.pull();
    assert.equal(g2.payload, 'g2');
    await g2.finish();
    assert.equal(await queue.count(), 0);
  } finally {
    await queue.close();
  }
});

test('a URL with a password is kept out of the message when the server cannot be reached', async () => {
  const url = NO_SERVER.replace('nobody@', 'nobody:hunter2@');
  await assert.rejects(
    () => tq.open(url, { busyTimeout: 0 }),
    (error) => error instanceof tq.IoError && !error.message.includes('hunter2') && error.message.length > 0,
  );
  assert.throws(
    () => tq.openSync(url, { busyTimeout: 0 }),
    (error) => error instanceof tq.IoError && !error.message.includes('hunter2') && error.message.length > 0,
  );
});

test(
  'PostgreSQL: a watch outlives a server restart and still hears the cancellation',
  { skip: SKIP || (POSTGRES_DIR ? false : 'TQ_TEST_POSTGRES_DIR is not set (`make test-postgres` sets it)') },
  async () => {
    const schema = `node_test_${process.pid}_${Date.now()}`;
    const holder = await tq.open(POSTGRES_URL, { postgresSchema: schema });
    const other = await tq.open(POSTGRES_URL, { postgresSchema: schema });
    try {
      const id = await holder.push({ long: true });
      const task = await holder.pull();
      let settled = null;
      const watching = task.watchCancellation().then(
        (outcome) => (settled = outcome),
        (error) => (settled = error),
      );
      restartServer();
      // Past the watch's read of the task once a second.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      assert.equal(settled, null, `the watch ended: ${settled}`);
      await other.cancelTask(id, 'stop');
      await watching;
      assert.equal(settled, 'cancelled');
    } finally {
      await Promise.all([holder.close(), other.close()]);
    }
  },
);

test(
  'PostgreSQL: runWorker goes on across a server restart',
  { skip: SKIP || (POSTGRES_DIR ? false : 'TQ_TEST_POSTGRES_DIR is not set (`make test-postgres` sets it)') },
  async () => {
    const schema = `node_test_${process.pid}_${Date.now()}`;
    const queue = await tq.open(POSTGRES_URL, { postgresSchema: schema });
    try {
      // Unique keys make a push tried again after a cut connection store once.
      const pushAll = async (from, to) => {
        for (let i = from; i < to; i++) {
          for (let tries = 0; ; tries++) {
            try {
              await queue.pushUnique({ i }, String(i));
              break;
            } catch (error) {
              if (tries === 300) throw error;
              await new Promise((resolve) => setTimeout(resolve, 100));
            }
          }
        }
      };
      const seen = new Set();
      const stop = new AbortController();
      const refused = [];
      const worker = tq.runWorker(
        queue,
        (task) => {
          seen.add(task.payload.i);
          if (seen.size === 10) stop.abort();
        },
        { concurrency: 2, lease: 2000, signal: stop.signal, stopOnSignals: false, onError: (error) => refused.push(error) },
      );
      const until = async (count) => {
        const deadline = Date.now() + 30_000;
        while (seen.size < count) {
          assert.ok(Date.now() < deadline, `${seen.size} of ${count} tasks handled after 30 s`);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      };
      await pushAll(0, 5);
      await until(5);
      restartServer();
      await pushAll(5, 10);
      await until(10);
      await worker;
      assert.equal(await queue.count('pending') + await queue.count('leased'), 0);
    } finally {
      await queue.close();
    }
  },
);

'use strict';
// tq's Node.js binding against the plain C loops and against plainjob, a
// queue on SQLite from npm, in one run.
//
//   make bench-node                 (from the repository root)
//   TQ_BENCH_QUICK=1 make bench-node   a smoke run of a few seconds
//
// Subjects, each on a fresh file in one directory per run:
//
// - c: bench/node/c_loops.c, libtq called from C in a loop (the loops of the
//   Go binding's benchmarks), its loop timed by itself: the floor.
// - node: the binding's promise forms, as an application calls them, from
//   4 concurrent loops (as runWorker's 4 handlers): `await queue.push(text)`;
//   `await queue.pull()` then `await task.finish()`. Each call runs on
//   libuv's pool, at most 2 of a Queue's at a time.
// - node 1 at a time: the same from one loop, each call awaited before the
//   next: the cost of a trip to libuv's pool.
// - node sync: the synchronous forms, for scripts: queue.pushSync(text);
//   queue.pullSync() then task.finishSync(), on the event loop's thread.
// - plainjob: plainjob 0.0.14 on better-sqlite3 (WAL, synchronous=NORMAL):
//   queue.add(type, data); getAndMarkJobAsProcessing(type) then
//   markJobAsDone(id), the calls its worker makes. It has no durability
//   setting, so it runs in the normal rows only.
//
// Rows: push and pull+finish from one thread at durability normal (several
// times faster than full, so the binding's own cost weighs most there) and
// full. Runs are interleaved (c, node, plainjob, c, ...) so that a noisy
// stretch of a shared machine touches all alike; each figure is the median
// of the runs' operations per second, with min and max, and each ratio the
// median of the runs' ratios (time per operation over C's: 1.10 is 10%
// slower than C).
//
// Then: tq's worker helper, runWorker with 4 handlers, against a loop
// written as the Python prototype tq replaces is (its table; a pull in
// BEGIN IMMEDIATE, then a finish that deletes the row) on better-sqlite3, draining tasks
// pushed beforehand, at normal and full, interleaved.
//
// Then: the event loop's delay (perf_hooks.monitorEventLoopDelay, 1 ms
// resolution) while 4 handlers drain a backlog through the promise forms,
// and through the synchronous forms (each handler yielding to the event
// loop between tasks), as p50, p99 and max; how late a 10 ms timer fires while 4 pulls wait (on one Queue, and
// on four Queues each holding one of libuv's worker threads), as p50, p99
// and max over its ticks, next to the same timer with no pull waiting, the
// three cases measured in half-second stretches taken in turns; and
// the resident set across 200,000 pushes and pulls (promise forms) on one queue, every
// other task dropped without being finished or closed (freed when garbage
// collected; its lease of 1 ms is recovered and the task finished), after a
// full garbage collection at each tenth of the work.
//
// Knobs: TQ_BENCH_RUNS (5), TQ_BENCH_OPS (2000 at normal; a tenth at full),
// TQ_BENCH_QUICK=1 (1 run of 100 operations, 20,000 for the resident set,
// 0.5 s of timer), TQ_BENCH_DIR (target/bench-tmp: a directory on the disk
// to measure, not a tmpfs), TQ_BENCH_C_LOOPS (the c_loops program).

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const tq = require('tq');
const Database = require('better-sqlite3');
const plainjob = require('plainjob');

const QUICK = process.env.TQ_BENCH_QUICK === '1';
const RUNS = QUICK ? 1 : Number(process.env.TQ_BENCH_RUNS ?? 5);
const OPS = QUICK ? 100 : Number(process.env.TQ_BENCH_OPS ?? 2000);
const RSS_OPS = QUICK ? 20_000 : 200_000;
const TIMER_MS = QUICK ? 500 : 5000;
const REPOSITORY = path.resolve(__dirname, '..', '..');
const BENCH_DIR = process.env.TQ_BENCH_DIR ?? path.join(REPOSITORY, 'target', 'bench-tmp');
const C_LOOPS = process.env.TQ_BENCH_C_LOOPS ?? path.join(REPOSITORY, 'build', 'node-bench', 'c_loops');

// The payload of the crate's throughput benchmark, and of c_loops.
const PAYLOAD = '{"kind":"email","to":"user@example.com","template":"welcome"}';
const PAYLOAD_OBJECT = JSON.parse(PAYLOAD);

let files = 0;
/** A path for a new queue file in this run's directory. */
function freshFile(dir) {
  return path.join(dir, `q${files++}.db`);
}

/** Seconds of c_loops' own timing of `op` (push or pull_finish) over `n`,
 * at `durability` ('full' or 'normal'). */
function cLoop(file, durability, op, n) {
  const value = durability === 'normal' ? '1' : '0';
  return Number(execFileSync(C_LOOPS, [file, value, op, String(n)], { encoding: 'utf8' })) / 1e9;
}

/** Seconds `fn` took. */
async function timed(fn) {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e9;
}

const SUBJECTS = {
  c: {
    push: (file, durability, n) => cLoop(file, durability, 'push', n),
    pullFinish: (file, durability, n) => cLoop(file, durability, 'pull_finish', n),
  },
  node: {
    push: (file, durability, n) =>
      withQueue(file, durability, (queue) => timed(() => concurrently(4, n, () => queue.push(PAYLOAD)))),
    pullFinish: (file, durability, n) =>
      withQueue(file, durability, async (queue) => {
        await queue.pushMany(Array(n).fill(PAYLOAD));
        return timed(() => concurrently(4, n, async () => (await queue.pull()).finish()));
      }),
  },
  'node 1 at a time': {
    push: (file, durability, n) => withQueue(file, durability, (queue) => timed(() => concurrently(1, n, () => queue.push(PAYLOAD)))),
    pullFinish: (file, durability, n) =>
      withQueue(file, durability, async (queue) => {
        await queue.pushMany(Array(n).fill(PAYLOAD));
        return timed(() => concurrently(1, n, async () => (await queue.pull()).finish()));
      }),
  },
  'node sync': {
    push: (file, durability, n) =>
      withQueue(file, durability, (queue) =>
        timed(() => {
          for (let i = 0; i < n; i++) queue.pushSync(PAYLOAD);
        }),
      ),
    pullFinish: (file, durability, n) =>
      withQueue(file, durability, async (queue) => {
        await queue.pushMany(Array(n).fill(PAYLOAD));
        return timed(() => {
          for (let i = 0; i < n; i++) queue.pullSync().finishSync();
        });
      }),
  },
  plainjob: {
    normalOnly: true,
    push: (file, _durability, n) =>
      withPlainjob(file, (queue) =>
        timed(() => {
          for (let i = 0; i < n; i++) queue.add('bench', PAYLOAD_OBJECT);
        }),
      ),
    pullFinish: (file, _durability, n) =>
      withPlainjob(file, (queue) => {
        for (let i = 0; i < n; i++) queue.add('bench', PAYLOAD_OBJECT);
        return timed(() => {
          for (let i = 0; i < n; i++) {
            const job = queue.getAndMarkJobAsProcessing('bench');
            queue.markJobAsDone(job.id);
          }
        });
      }),
  },
};

/** Runs `fn(queue)` on a queue opened on `file`, closing it after. */
async function withQueue(file, durability, fn) {
  const queue = await tq.open(file, { durability });
  try {
    return await fn(queue);
  } finally {
    await queue.close();
  }
}

/** Runs `op` `n` times in all from `loops` loops at once, each awaiting
 * its call before the next. */
async function concurrently(loops, n, op) {
  let left = n;
  const loop = async () => {
    while (left > 0) {
      left--;
      await op();
    }
  };
  await Promise.all(Array.from({ length: loops }, loop));
}

/** The event loop's delay, in ms (p50, p99, max), while 4 handlers drain
 * `n` tasks through the promise forms, or (`sync`) through the
 * synchronous forms, each handler yielding to the event loop between two
 * tasks as a handler with any I/O does. */
async function drainDelay(file, n, sync) {
  return withQueue(file, 'normal', async (queue) => {
    await queue.pushMany(Array(n).fill(PAYLOAD));
    const histogram = monitorEventLoopDelay({ resolution: 1 });
    histogram.enable();
    await concurrently(4, n, async () => {
      if (sync) {
        queue.pullSync().finishSync();
        await new Promise((resolve) => setImmediate(resolve));
      } else {
        await (await queue.pull()).finish();
      }
    });
    histogram.disable();
    const ms = (ns) => ns / 1e6;
    return [ms(histogram.percentile(50)), ms(histogram.percentile(99)), ms(histogram.max)];
  });
}

/** Seconds a loop written as the prototype is (its table, its pull in
 * BEGIN IMMEDIATE and its finish, a DELETE), on better-sqlite3 at `durability`,
 * takes to drain `n` tasks pushed beforehand. */
function prototypeLoop(file, durability, n) {
  const db = new Database(file);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${durability === 'normal' ? 'NORMAL' : 'FULL'}`);
    db.exec(`CREATE TABLE tasks (
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      payload TEXT NOT NULL,
      status TEXT NOT NULL DEFAULT 'pending',
      created_at DATETIME DEFAULT CURRENT_TIMESTAMP)`);
    const insert = db.prepare("INSERT INTO tasks (payload, status) VALUES (?, 'pending')");
    db.transaction(() => {
      for (let i = 0; i < n; i++) insert.run(PAYLOAD);
    })();
    const begin = db.prepare('BEGIN IMMEDIATE');
    const select = db.prepare("SELECT id, payload FROM tasks WHERE status='pending' ORDER BY id LIMIT 1");
    const claim = db.prepare("UPDATE tasks SET status='processing' WHERE id=?");
    const commit = db.prepare('COMMIT');
    const rollback = db.prepare('ROLLBACK');
    const finish = db.prepare('DELETE FROM tasks WHERE id=?');
    const start = process.hrtime.bigint();
    let done = 0;
    for (;;) {
      begin.run();
      const row = select.get();
      if (!row) {
        rollback.run();
        break;
      }
      claim.run(row.id);
      commit.run();
      JSON.parse(row.payload);
      finish.run(row.id);
      done++;
    }
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    if (done !== n) throw new Error(`the better-sqlite3 loop drained ${done} of ${n} tasks`);
    return seconds;
  } finally {
    db.close();
  }
}

/** Seconds runWorker, 4 handlers reading each payload, takes to drain `n`
 * tasks pushed beforehand, until its last finish is committed. */
async function workerDrain(file, durability, n) {
  return withQueue(file, durability, async (queue) => {
    await queue.pushMany(Array(n).fill(PAYLOAD));
    const stop = new AbortController();
    let handled = 0;
    const seconds = await timed(async () => {
      const stats = await tq.runWorker(
        queue,
        (task) => {
          task.payload;
          if (++handled === n) stop.abort();
        },
        { concurrency: 4, signal: stop.signal, stopOnSignals: false },
      );
      if (stats.finished !== n) throw new Error(`runWorker finished ${stats.finished} of ${n} tasks`);
    });
    return seconds;
  });
}

const SILENT = { error() {}, warn() {}, info() {}, debug() {} };

async function withPlainjob(file, fn) {
  const db = new Database(file);
  const queue = plainjob.defineQueue({ connection: plainjob.better(db), logger: SILENT });
  try {
    return await fn(queue);
  } finally {
    queue.close();
    db.close();
  }
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

function rate(seconds, n) {
  return n / seconds;
}

function formatRate(rates) {
  if (!rates.length) return '—';
  const round = (value) => Math.round(value).toLocaleString('en-US');
  return `${round(median(rates))} (${round(Math.min(...rates))}–${round(Math.max(...rates))})`;
}

/** Times every subject of a row RUNS times, interleaved; returns the rates
 * by subject and the ratios of each subject's time to C's by run. */
async function row(dir, scenario, durability, n) {
  const names = Object.keys(SUBJECTS).filter(
    (name) => SUBJECTS[name][scenario] && !(SUBJECTS[name].normalOnly && durability !== 'normal'),
  );
  const seconds = Object.fromEntries(names.map((name) => [name, []]));
  for (let run = 0; run < RUNS; run++) {
    for (const name of names) {
      seconds[name].push(await SUBJECTS[name][scenario](freshFile(dir), durability, n));
    }
  }
  return Object.fromEntries(
    names.map((name) => [
      name,
      {
        rates: seconds[name].map((s) => rate(s, n)),
        overC: median(seconds[name].map((s, run) => s / seconds.c[run])),
        // Throughput over the synchronous forms': 0.8 is 20% fewer operations a second.
        overSync: median(seconds[name].map((s, run) => seconds['node sync'][run] / s)),
      },
    ]),
  );
}

/** The lateness of a 10 ms interval timer over `ms`, in milliseconds,
 * while `queues` each have one pull waiting (none: the timer alone). */
async function lateness(queues, ms) {
  const pulls = queues.map((queue) => queue.pull({ wait: Infinity }));
  const late = [];
  await new Promise((resolve) => {
    let expected = performance.now() + 10;
    const timer = setInterval(() => {
      const now = performance.now();
      late.push(Math.max(0, now - expected));
      expected = now + 10;
      if (late.length * 10 >= ms) {
        clearInterval(timer);
        resolve();
      }
    }, 10);
  });
  if (queues.length) {
    await queues[0].pushMany(queues.map((_, i) => i));
    await Promise.all((await Promise.all(pulls)).map((task) => task.finish()));
  }
  return late;
}

/** A full garbage collection when node runs with --expose-gc (as make
 * bench-node runs it), then a turn of the event loop for the finalizers
 * that free dropped tasks. */
async function collectGarbage() {
  globalThis.gc?.();
  await new Promise((resolve) => setImmediate(resolve));
}

/** RSS in MiB. */
function rssMiB() {
  return process.memoryUsage().rss / 2 ** 20;
}

/** The resident set across RSS_OPS pushes and pulls through the promise
 * forms, every other task dropped; returns the samples in MiB, one per
 * tenth of the work. */
async function residentSet(dir) {
  const queue = await tq.open(freshFile(dir), { durability: 'normal' });
  const samples = [];
  const step = RSS_OPS / 10;
  try {
    for (let i = 0; i < RSS_OPS; i++) {
      await queue.push(PAYLOAD);
      const task = await queue.pull({ lease: 1 });
      if (i % 2 === 0) await task.finish();
      if ((i + 1) % step === 0) {
        // The dropped tasks come back and are finished, so that the file
        // stays small.
        await queue.recover();
        for (let again; (again = await queue.pull()); ) await again.finish();
        await collectGarbage();
        samples.push(rssMiB());
      }
    }
  } finally {
    await queue.close();
  }
  return samples;
}

async function main() {
  fs.mkdirSync(BENCH_DIR, { recursive: true });
  const dir = fs.mkdtempSync(path.join(BENCH_DIR, 'node-'));
  try {
    console.log(`# tq ${tq.libraryVersion()} from Node.js ${process.version} (koffi ${require(require.resolve('koffi', { paths: [require.resolve('tq')] })).version}) against C and plainjob 0.0.14`);
    console.log(`# ${os.cpus().length} CPUs, files in ${BENCH_DIR}; ${RUNS} runs, interleaved, of ${OPS} operations (normal) and ${OPS / 10} (full)${QUICK ? ' (quick: figures mean nothing)' : ''}`);
    console.log('');
    // One untimed round of every subject first: the JIT compiles the
    // binding's paths, and the page cache holds the libraries.
    for (const subject of Object.values(SUBJECTS)) {
      await subject.push?.(freshFile(dir), 'normal', Math.min(OPS, 200));
      await subject.pullFinish(freshFile(dir), 'normal', Math.min(OPS, 200));
    }
    console.log('| durability | scenario | subject | ops/s median (min–max) | time per op over C | ops/s over node sync |');
    console.log('| --- | --- | --- | --- | --- | --- |');
    for (const durability of ['normal', 'full']) {
      const n = durability === 'normal' ? OPS : Math.max(1, OPS / 10);
      for (const [scenario, label] of [
        ['push', 'push'],
        ['pullFinish', 'pull+finish'],
      ]) {
        const results = await row(dir, scenario, durability, n);
        for (const [name, { rates, overC, overSync }] of Object.entries(results)) {
          const versusSync = name.startsWith('node') ? overSync.toFixed(2) : '';
          console.log(`| ${durability} | ${label} | ${name} | ${formatRate(rates)} | ${name === 'c' ? '1' : overC.toFixed(2)} | ${versusSync} |`);
        }
      }
    }

    console.log('');
    console.log(
      `The worker helper against a better-sqlite3 loop written as the prototype is (pull in BEGIN IMMEDIATE, then finish), draining tasks pushed beforehand (${OPS} at normal, ${OPS / 10} at full):`,
    );
    console.log('| durability | better-sqlite3 loop ops/s | runWorker, concurrency 4, ops/s | runWorker over the loop |');
    console.log('| --- | --- | --- | --- |');
    for (const durability of ['normal', 'full']) {
      const n = durability === 'normal' ? OPS : Math.max(1, OPS / 10);
      const loop = [];
      const worker = [];
      for (let run = 0; run < RUNS; run++) {
        loop.push(rate(prototypeLoop(freshFile(dir), durability, n), n));
        worker.push(rate(await workerDrain(freshFile(dir), durability, n), n));
      }
      console.log(`| ${durability} | ${formatRate(loop)} | ${formatRate(worker)} | ${(median(worker) / median(loop)).toFixed(2)} |`);
    }

    console.log('');
    const drained = OPS * 2;
    console.log(`The event loop's delay while 4 handlers drain ${drained.toLocaleString('en-US')} tasks at normal (ms):`);
    console.log('| forms | p50 | p99 | max |');
    console.log('| --- | --- | --- | --- |');
    for (const [label, sync] of [['promise', false], ['sync', true]]) {
      const [p50, p99, max] = await drainDelay(freshFile(dir), drained, sync);
      console.log(`| ${label} | ${p50.toFixed(2)} | ${p99.toFixed(2)} | ${max.toFixed(2)} |`);
    }

    console.log('');
    console.log(`A 10 ms timer for ${TIMER_MS / 1000} s in each case (lateness in ms):`);
    console.log('| while | p50 | p99 | max |');
    console.log('| --- | --- | --- | --- |');
    const file = freshFile(dir);
    const one = await tq.open(file);
    const four = await Promise.all(Array.from({ length: 4 }, () => tq.open(file)));
    const cases = [
      ['no pull waits', []],
      ['4 pulls wait on one Queue', [one, one, one, one]],
      ['4 pulls wait on four Queues', four],
    ];
    // Stretches of half a second, taken in turns, so that the machine's
    // noise touches all three alike.
    const late = cases.map(() => []);
    try {
      for (let stretch = 0; stretch * 500 < TIMER_MS; stretch++) {
        for (const [i, [, queues]] of cases.entries()) late[i].push(...(await lateness(queues, 500)));
      }
    } finally {
      await Promise.all([one, ...four].map((queue) => queue.close()));
    }
    cases.forEach(([label], i) => {
      const ticks = late[i];
      console.log(`| ${label} | ${percentile(ticks, 50).toFixed(2)} | ${percentile(ticks, 99).toFixed(2)} | ${Math.max(...ticks).toFixed(2)} |`);
    });

    console.log('');
    await collectGarbage();
    const before = rssMiB();
    const samples = await residentSet(dir);
    console.log(
      `Resident set across ${RSS_OPS.toLocaleString('en-US')} pushes and pulls, every other task dropped unfinished, after a full GC: ` +
        `${before.toFixed(1)} MiB before, then at each tenth ${samples.map((mib) => mib.toFixed(1)).join(', ')} MiB ` +
        `(from the first tenth to the last: ${(samples[samples.length - 1] - samples[0]).toFixed(1)} MiB)`,
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});

'use strict';
// Nothing leaks: the resident set stays flat across many pushes and pulls,
// half of the tasks dropped without being finished or closed (freed when
// garbage collected). The benchmark (bench/node) reports the same over
// 1,000,000 operations.

const test = require('node:test');
const assert = require('node:assert/strict');
const { PACKAGE_DIR, queuePath, runCommand, childEnv } = require('./helpers');

// Runs `rounds` rounds of `perRound` pushes and pulls in a child, and prints
// the resident set in bytes after each round as JSON, after a full GC.
const CHURN = `
const tq = require(${JSON.stringify(PACKAGE_DIR)});
const [path, rounds, perRound] = [process.argv[1], Number(process.argv[2]), Number(process.argv[3])];
const rss = [];
(async () => {
  const queue = await tq.open(path, { durability: 'normal' });
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < perRound; i++) {
      await queue.push({ round, i, text: 'x'.repeat(4000) });
      const task = i % 2 ? await queue.pull({ lease: 1 }) : await queue.pull();
      if (i % 2 === 0) await task.finish();
    }
    // Leases of 1 ms: the dropped tasks come back, and are finished, so
    // that the file stays small.
    await queue.recover();
    for (let task; (task = await queue.pull()); ) await task.finish();
    await new Promise((resolve) => setImmediate(resolve));
    globalThis.gc();
    rss.push(process.memoryUsage().rss);
  }
  await queue.close();
  console.log(JSON.stringify(rss));
})();
`;

test('the resident set stays flat across pushes and pulls, dropped tasks included', async () => {
  const run = await runCommand(process.execPath, ['--expose-gc', '-e', CHURN, '--', queuePath(), '8', '2000'], {
    env: childEnv(),
  });
  assert.equal(run.status, 0, run.stderr);
  const rss = JSON.parse(run.stdout);
  // The first rounds warm up (SQLite's page cache, the JIT); past them,
  // 10,000 pushes and pulls may not grow the process by more than 8 MiB,
  // less than half of what keeping the 5,000 tasks dropped meanwhile, 4 kB
  // each, would take.
  const growth = rss[rss.length - 1] - rss[2];
  assert.ok(growth < 8 * 2 ** 20, `grew by ${(growth / 2 ** 20).toFixed(1)} MiB: ${rss.map((bytes) => (bytes / 2 ** 20).toFixed(1))}`);
});

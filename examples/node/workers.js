'use strict';
// The prototype's scenario with tq: push 100 tasks in one batch, then four
// workers pull and finish them until none is left, each "working" 10 ms on
// a task.
//
//   make example-node                                   (from the repository root)
//   node examples/node/workers.js [QUEUE_FILE]          (the package installed,
//                                                        or TQ_LIBRARY set)
//
// QUEUE_FILE defaults to tasks.db, created if needed. Prints how many tasks
// are left (0) and how many each worker finished.

const { setTimeout: sleep } = require('node:timers/promises');
const tq = require('tq');

const TASKS = 100;
const WORKERS = 4;

async function main(path = 'tasks.db') {
  const queue = await tq.open(path);
  try {
    await queue.recover(); // take back what crashed workers held
    await queue.pushMany(Array.from({ length: TASKS }, (_, index) => ({ index, sleepMs: 10 }))); // one transaction

    const finished = new Array(WORKERS).fill(0);
    const worker = async (id) => {
      let task = await queue.pull();
      while (task !== null) {
        await sleep(task.payload.sleepMs);
        // One commit finishes this task and claims the next (null when none is left).
        task = await task.finishAndPull();
        finished[id]++;
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, (_, id) => worker(id)));
    console.log('pending left:', await queue.count('pending'));
    console.log('finished per worker:', JSON.stringify(finished));
  } finally {
    await queue.close();
  }
}

main(process.argv[2]).catch((error) => {
  console.error(error);
  process.exitCode = 1;
});

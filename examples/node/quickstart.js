'use strict';
// The shortest worker: push a task, then pull and finish tasks until none
// is ready.
//
//   make example-node                                (from the repository root)
//   node examples/node/quickstart.js [QUEUE_FILE]    (the package installed; default jobs.db)

const tq = require('tq');

async function main(path = 'jobs.db') {
  const queue = await tq.open(path);
  try {
    await queue.recover(); // take back what crashed workers held
    await queue.push({ file: 'a.mp4' });
    let task = await queue.pull(); // null when no task is ready
    while (task !== null) {
      console.log(`task ${task.id}: ${JSON.stringify(task.payload)}`);
      task = await task.finishAndPull(); // one commit: finish this task, claim the next
    }
  } finally {
    await queue.close();
  }
}

main(process.argv[2]).catch((error) => {
  console.error(error);
  process.exitCode = 1;
});

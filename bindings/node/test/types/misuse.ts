// Calls index.d.ts must refuse: each line below is a type error, or tsc
// reports the directive unused and test/typescript.test.js fails.

import * as tq from '../..';

async function misuse(queue: tq.Queue, task: tq.Task): Promise<void> {
  // @ts-expect-error: a priority is a number
  queue.push(1, { priority: 'high' });
  // @ts-expect-error: pushMany takes no unique key
  queue.pushMany([1], { uniqueKey: 'k' });
  // @ts-expect-error: pull resolves to a Task or null, not a Task
  const pulled: tq.Task = await queue.pull();
  // @ts-expect-error: a signal is an AbortSignal
  await queue.pull({ signal: true });
  // @ts-expect-error: durability is 'full' or 'normal'
  tq.open('x.db', { durability: 'eventual' });
  // @ts-expect-error: a task's fields are read-only
  task.id = 3;
  // @ts-expect-error: snapshots cannot be finished
  queue.list()[0].finish();
  // @ts-expect-error: close() returns a promise, not a count
  const closed: number = await queue.close();
  console.log(pulled, closed);
}
misuse;

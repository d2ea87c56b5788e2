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
  await tq.open('x.db', { durability: 'eventual' });
  // @ts-expect-error: a task's fields are read-only
  task.id = 3;
  // @ts-expect-error: snapshots cannot be finished
  (await queue.list())[0].finish();
  // @ts-expect-error: after takes ids, not one id
  queue.push(1, { after: 3 });
  // @ts-expect-error: onParentFailure is 'cancel' or 'runAnyway'
  queue.push(1, { after: [3], onParentFailure: 'ignore' });
  // @ts-expect-error: a group key is a string
  queue.push(1, { group: 5 });
  // @ts-expect-error: groupMax is a number
  queue.push(1, { group: 'g', groupMax: 'two' });
  // @ts-expect-error: afterItems belongs to pushItems' items
  queue.push(1, { afterItems: [0] });
  // @ts-expect-error: pushMany takes no afterItems either
  queue.pushMany([1], { afterItems: [0] });
  // @ts-expect-error: an item needs its payload
  queue.pushItems([{ afterItems: [0] }]);
  // @ts-expect-error: pushItems takes items, not payloads
  queue.pushItems([1, 2]);
  // @ts-expect-error: a snapshot's waitingFor is read-only
  (await queue.list())[0].waitingFor.push(1);
  // @ts-expect-error: a task's parents are read-only
  task.parents = [];
  // @ts-expect-error: a schedule needs its options
  queue.addSchedule('s', 1);
  // @ts-expect-error: every is milliseconds, not text
  queue.addSchedule('s', 1, { every: '1m' });
  // @ts-expect-error: catchUp is 'skip', 'one' or 'each'
  queue.addSchedule('s', 1, { cron: '@daily', catchUp: 'all' });
  // @ts-expect-error: a time zone is a name
  queue.replaceSchedule('s', 1, { cron: '@daily', timeZone: 2 });
  // @ts-expect-error: a schedule's next slot is a Date
  const slot: number = (await queue.schedules())[0].nextSlot;
  // @ts-expect-error: runDueSchedules resolves to a count
  const due: string = await queue.runDueSchedules();
  // @ts-expect-error: removeSchedule takes a name
  queue.removeSchedule();
  // @ts-expect-error: a push resolves to an id: it is not one
  const id: number = queue.push(1);
  // @ts-expect-error: a Queue is opened with tq.open, not constructed
  new tq.Queue('x.db');
  // @ts-expect-error: close() returns a promise, not a count
  const closed: number = await queue.close();
  console.log(pulled, closed, slot, due, id);
}
misuse;

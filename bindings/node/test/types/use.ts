// Uses every part of the API as index.d.ts declares it, with no Node.js
// types; compiled, never run, by test/typescript.test.js.

import * as tq from '../..';

async function main(): Promise<void> {
  const queue: tq.Queue = await tq.open('x.db', { durability: 'normal', retryBackoff: { min: 0, max: 10 } });
  const id: number = await queue.push({ a: 1 }, { priority: 2, delay: 10 });
  const unique: { id: number; created: boolean } = await queue.pushUnique('"x"', 'k');
  const ids: number[] = await queue.pushMany([new TextEncoder().encode('[1]'), '2']);
  const stop = new AbortController();
  const task: tq.Task | null = await queue.pull({ wait: 1000, lease: 5000, signal: stop.signal });
  if (task) {
    const state: tq.StateName = task.state;
    await task.extend(1000);
    const next: tq.Task | null = await task.finishAndPull({ lease: 10 });
    await next?.fail(new Error('x'));
    console.log(state);
  }
  for await (const t of queue.tasks({ wait: 0 })) await t.snooze(10);
  const worked: tq.Task | null = await queue.pull();
  await worked?.extend(1000, { progress: { done: 1 } });
  await worked?.finish({ result: { ok: true } });
  const now: tq.TaskSnapshot | null = await queue.task(id);
  const ended: tq.TaskSnapshot | null = await queue.wait(id, { timeout: 1000, signal: stop.signal });
  console.log(now?.progress, now?.rawProgress, ended?.result, ended?.rawResult);
  const script: tq.Queue = tq.openSync('y.db', { resultRetention: 60_000 });
  const pushed: number = script.pushSync({ b: 2 });
  const claimed: tq.Task | null = script.pullSync({ lease: 1000 });
  claimed?.finishSync();
  console.log(pushed);
  await script.close();
  const cancelled: 'cancelled' | 'leased' = await queue.cancelTask(id, new Error('not wanted'));
  await queue.pause(new Date(Date.now() + 1000));
  const until: Date | number | null = await queue.pausedUntil();
  await queue.resume();
  await queue.setConcurrencyLimit(2);
  const limit: number | null = await queue.concurrencyLimit();
  await queue.setConcurrencyLimit(null);
  await queue.setRateLimit(10, 1000);
  const rate: { claims: number; perMs: number } | null = await queue.rateLimit();
  await queue.setRateLimit(null);
  console.log(rate);
  console.log(cancelled, until, limit, tq.UNTIL_RESUMED > 0n);
  const parent = await queue.push(1);
  const child = await queue.push(2, { after: [parent], onParentFailure: 'runAnyway', group: 'g', groupMax: 2 });
  await queue.push(3, { after: [child], onParentFailure: tq.ParentFailure.CANCEL });
  const graph: number[] = await queue.pushItems([
    { payload: { step: 1 }, group: 'g' },
    { payload: '"2"', afterItems: [0], after: [parent], onParentFailure: 'cancel', uniqueKey: 'u', priority: 1 },
  ]);
  await queue.pushMany([4, 5], { group: 'h', after: [parent] });
  const waiting: readonly number[] = (await queue.task(child))?.waitingFor ?? [];
  const group: string | null = (await queue.task(child))?.group ?? null;
  const parents: readonly number[] = (await queue.pull())?.parents ?? [];
  console.log(graph, waiting, group, parents, tq.MAX_PARENTS, tq.MAX_GROUP_AT_ONCE);
  await queue.addSchedule('nightly', { report: 1 }, { cron: '0 3 * * *', timeZone: 'Europe/Paris', priority: 1, maxAttempts: 3, catchUp: 'each', catchUpLimit: 5 });
  await queue.replaceSchedule('tick', '"tick"', { every: 60_000, catchUp: tq.CatchUp.SKIP });
  await queue.upsertSchedule('tock', '"tock"', { every: 60_000 });
  const schedules: tq.Schedule[] = await queue.schedules();
  for (const s of schedules) {
    const next: Date = s.nextSlot;
    const catchUp: tq.CatchUpName = s.catchUp;
    console.log(s.name, s.cron, s.every, s.timeZone, s.raw, s.payload, s.priority, s.maxAttempts, catchUp, s.catchUpLimit, s.paused, next);
    await queue.replaceSchedule(s.name, s.payload, { ...s, every: 1000, cron: null });
  }
  await queue.pauseSchedule('tick');
  await queue.resumeSchedule('tick');
  await queue.removeSchedule('tick');
  const enqueued: number = await queue.runDueSchedules();
  console.log(enqueued);
  const counts: Record<tq.StateName, number> = await queue.counts();
  const snapshots: tq.TaskSnapshot[] = await queue.list('dead', { afterId: 0, limit: 10 });
  for await (const s of queue.iterTasks(tq.State.PENDING)) console.log(s.payload, s.lastError);
  const finished: boolean[] = await queue.finishMany([]);
  const watched: 'cancelled' | 'ended' | undefined = await worked?.watchCancellation({ signal: stop.signal });
  console.log(finished, watched, await queue.recover(), await queue.retryAllDead(), await queue.purge({ state: 'done' }));
  console.log(await queue.checkpoint(), await queue.walSize(), await queue.groupsWaiting());
  await queue.retryDead(1);
  queue.interrupt();
  const stats = await tq.runWorker(queue, async (t) => { await Promise.resolve(t.id); }, { concurrency: 2, onError: (e, t) => console.log(e.message, t?.id) });
  console.log(id, unique, ids, counts, snapshots, stats.finished, await queue.oldestReadyAge(), tq.MAX_PAYLOAD_LEN, tq.libraryVersion());
  try { await queue.push('x'); } catch (error) { if (error instanceof tq.InvalidJsonError) console.log(error.status, error.index); }
  {
    await using scoped = await tq.open('z.db');
    using held = await scoped.pull();
    console.log(held?.id);
  }
  await queue.close();
}
main();

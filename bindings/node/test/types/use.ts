// Uses every part of the API as index.d.ts declares it; compiled, never run,
// by test/typescript.test.js.

import * as tq from '../..';

async function main(): Promise<void> {
  const queue: tq.Queue = tq.open('x.db', { durability: 'normal', retryBackoff: { min: 0, max: 10 } });
  const id: number = queue.push({ a: 1 }, { priority: 2, delay: 10 });
  const unique: { id: number; created: boolean } = queue.pushUnique('"x"', 'k');
  const ids: number[] = queue.pushMany([Buffer.from('[1]'), '2']);
  const stop = new AbortController();
  const task: tq.Task | null = await queue.pull({ wait: 1000, lease: 5000, signal: stop.signal });
  if (task) {
    const state: tq.StateName = task.state;
    task.extend(1000);
    const next: tq.Task | null = task.finishAndPull({ lease: 10 });
    next?.fail(new Error('x'));
  }
  for await (const t of queue.tasks({ wait: 0 })) t.snooze(10);
  const worked: tq.Task | null = await queue.pull();
  worked?.extend(1000, { progress: { done: 1 } });
  worked?.finish({ result: { ok: true } });
  const now: tq.TaskSnapshot | null = queue.task(id);
  const ended: tq.TaskSnapshot | null = await queue.wait(id, { timeout: 1000, signal: stop.signal });
  console.log(now?.progress, now?.rawProgress, ended?.result, ended?.rawResult);
  tq.open('y.db', { resultRetention: 60_000 });
  const cancelled: 'cancelled' | 'leased' = queue.cancelTask(id, new Error('not wanted'));
  queue.pause(new Date(Date.now() + 1000));
  const until: Date | number | null = queue.pausedUntil();
  queue.resume();
  queue.setConcurrencyLimit(2);
  const limit: number | null = queue.concurrencyLimit();
  queue.setConcurrencyLimit(null);
  queue.setRateLimit(10, 1000);
  const rate: { claims: number; perMs: number } | null = queue.rateLimit();
  queue.setRateLimit(null);
  console.log(rate);
  console.log(cancelled, until, limit, tq.UNTIL_RESUMED > 0n);
  const parent = queue.push(1);
  const child = queue.push(2, { after: [parent], onParentFailure: 'runAnyway', group: 'g', groupMax: 2 });
  queue.push(3, { after: [child], onParentFailure: tq.ParentFailure.CANCEL });
  const graph: number[] = queue.pushItems([
    { payload: { step: 1 }, group: 'g' },
    { payload: '"2"', afterItems: [0], after: [parent], onParentFailure: 'cancel', uniqueKey: 'u', priority: 1 },
  ]);
  queue.pushMany([4, 5], { group: 'h', after: [parent] });
  const waiting: readonly number[] = queue.task(child)?.waitingFor ?? [];
  const group: string | null = queue.task(child)?.group ?? null;
  const parents: readonly number[] = (await queue.pull())?.parents ?? [];
  console.log(graph, waiting, group, parents, tq.MAX_PARENTS, tq.MAX_GROUP_AT_ONCE);
  queue.addSchedule('nightly', { report: 1 }, { cron: '0 3 * * *', timeZone: 'Europe/Paris', priority: 1, maxAttempts: 3, catchUp: 'each', catchUpLimit: 5 });
  queue.replaceSchedule('tick', '"tick"', { every: 60_000, catchUp: tq.CatchUp.SKIP });
  const schedules: tq.Schedule[] = queue.schedules();
  for (const s of schedules) {
    const next: Date = s.nextSlot;
    const catchUp: tq.CatchUpName = s.catchUp;
    console.log(s.name, s.cron, s.every, s.timeZone, s.raw, s.payload, s.priority, s.maxAttempts, catchUp, s.catchUpLimit, s.paused, next);
    queue.replaceSchedule(s.name, s.payload, { ...s, every: 1000, cron: null });
  }
  queue.pauseSchedule('tick');
  queue.resumeSchedule('tick');
  queue.removeSchedule('tick');
  const enqueued: number = queue.runDueSchedules();
  console.log(enqueued);
  const counts: Record<tq.StateName, number> = queue.counts();
  const snapshots: tq.TaskSnapshot[] = queue.list('dead', { afterId: 0, limit: 10 });
  for (const s of queue.iterTasks(tq.State.PENDING)) console.log(s.payload, s.lastError);
  const stats = await tq.runWorker(queue, async (t) => { await Promise.resolve(t.id); }, { concurrency: 2, onError: (e, t) => console.log(e.message, t?.id) });
  console.log(id, unique, ids, counts, snapshots, stats.finished, queue.oldestReadyAge(), tq.MAX_PAYLOAD_LEN, tq.libraryVersion());
  try { queue.push('x'); } catch (error) { if (error instanceof tq.InvalidJsonError) console.log(error.status, error.index); }
  await queue.close();
}
main();

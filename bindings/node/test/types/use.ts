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
  const counts: Record<tq.StateName, number> = queue.counts();
  const snapshots: tq.TaskSnapshot[] = queue.list('dead', { afterId: 0, limit: 10 });
  for (const s of queue.iterTasks(tq.State.PENDING)) console.log(s.payload, s.lastError);
  const stats = await tq.runWorker(queue, async (t) => { await Promise.resolve(t.id); }, { concurrency: 2, onError: (e, t) => console.log(e.message, t.id) });
  console.log(id, unique, ids, counts, snapshots, stats.finished, queue.oldestReadyAge(), tq.MAX_PAYLOAD_LEN, tq.libraryVersion());
  try { queue.push('x'); } catch (error) { if (error instanceof tq.InvalidJsonError) console.log(error.status, error.index); }
  await queue.close();
}
main();

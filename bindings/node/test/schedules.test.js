'use strict';
// Schedules: added, listed with every field, replaced, paused, resumed and
// removed; a due slot enqueued by runDueSchedules; bad input refused with
// nothing stored.

const test = require('node:test');
const assert = require('node:assert/strict');
const { tq, withQueue } = require('./helpers');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

test('a schedule is listed with every field it was given', () =>
  withQueue(async (queue) => {
    assert.deepEqual(await queue.schedules(), []);
    const before = Date.now();
    await queue.addSchedule('nightly', { report: 'sales' }, {
      cron: '30 2 * * *',
      timeZone: 'Europe/Paris',
      priority: 7,
      maxAttempts: 3,
      catchUp: 'each',
      catchUpLimit: 5,
    });
    await queue.addSchedule('tick', '"tick"', { every: 60_000 });
    const [nightly, tick] = await queue.schedules();
    const { nextSlot, ...fields } = nightly;
    assert.deepEqual(fields, {
      name: 'nightly',
      cron: '30 2 * * *',
      every: null,
      timeZone: 'Europe/Paris',
      raw: '{"report":"sales"}',
      payload: { report: 'sales' },
      priority: 7,
      maxAttempts: 3,
      catchUp: 'each',
      catchUpLimit: 5,
      paused: false,
    });
    // 02:30 in Paris is 00:30 or 01:30 UTC, within the next day.
    assert.ok(nextSlot instanceof Date);
    assert.ok(nextSlot > before && nextSlot <= before + 86_400_000, nextSlot.toISOString());
    assert.equal(nextSlot.getUTCMinutes(), 30);
    assert.ok([0, 1].includes(nextSlot.getUTCHours()), nextSlot.toISOString());
    assert.equal(tick.name, 'tick');
    assert.equal(tick.cron, null);
    assert.equal(tick.every, 60_000);
    assert.equal(tick.timeZone, 'UTC');
    assert.equal(tick.payload, 'tick');
    assert.equal(tick.priority, 0);
    assert.equal(tick.maxAttempts, tq.DEFAULT_MAX_ATTEMPTS);
    assert.equal(tick.catchUp, 'one');
    assert.equal(tick.catchUpLimit, 1);
    assert.ok(tick.nextSlot >= before + 60_000 && tick.nextSlot <= Date.now() + 60_000);
    // Nothing is enqueued before a slot is due.
    assert.equal(await queue.runDueSchedules(), 0);
    assert.equal(await queue.count(), 0);
  }));

test('replaced, paused, resumed and removed', () =>
  withQueue(async (queue) => {
    await queue.addSchedule('job', 1, { every: 60_000 });
    await queue.pauseSchedule('job');
    assert.equal((await queue.schedules())[0].paused, true);
    await queue.pauseSchedule('job');
    await queue.resumeSchedule('job');
    assert.equal((await queue.schedules())[0].paused, false);
    await queue.pauseSchedule('job');
    // A listed schedule can be given back, changed.
    const [listed] = await queue.schedules();
    await queue.replaceSchedule('job', { n: 2 }, { ...listed, every: null, cron: '@daily', catchUp: 'skip' });
    const [replaced] = await queue.schedules();
    assert.equal(replaced.cron, '@daily');
    assert.equal(replaced.every, null);
    assert.deepEqual(replaced.payload, { n: 2 });
    assert.equal(replaced.catchUp, 'skip');
    assert.equal(replaced.paused, false);
    // replaceSchedule adds a schedule the queue does not have.
    await queue.replaceSchedule('other', 3, { every: 1000 });
    // Declared again unchanged at a later start, it keeps its next slot.
    const slot = (await queue.schedules())[1].nextSlot;
    await new Promise((resolve) => setTimeout(resolve, 20));
    await queue.upsertSchedule('other', 3, { every: 1000 });
    assert.deepEqual((await queue.schedules())[1].nextSlot, slot);
    await queue.removeSchedule('job');
    assert.deepEqual((await queue.schedules()).map((schedule) => schedule.name), ['other']);
    for (const call of ['removeSchedule', 'pauseSchedule', 'resumeSchedule']) {
      await assert.rejects(() => queue[call]('job'), tq.InvalidArgumentError, call);
    }
  }));

test('a due slot is enqueued once by runDueSchedules, as a task of the schedule', () =>
  withQueue(async (queue) => {
    await queue.addSchedule('often', { ping: true }, { every: 300, priority: 4, maxAttempts: 2 });
    await sleep(700);
    // Two slots came due: the default catch-up runs one for both.
    assert.equal(await queue.runDueSchedules(), 1);
    assert.equal(await queue.runDueSchedules(), 0);
    const [enqueued] = await queue.list('pending');
    assert.deepEqual(enqueued.payload, { ping: true });
    assert.equal(enqueued.priority, 4);
    assert.equal(enqueued.maxAttempts, 2);
    assert.ok((await queue.schedules())[0].nextSlot > enqueued.runAt);
    await queue.pauseSchedule('often');
    await sleep(400);
    assert.equal(await queue.runDueSchedules(), 0);
    assert.equal(await queue.count(), 1);
  }));

test('a pull drives the due schedules by itself', () =>
  withQueue(async (queue) => {
    await queue.addSchedule('soon', '"due"', { every: 20 });
    const task = await queue.pull({ wait: 10_000 });
    assert.equal(task.payload, 'due');
    await task.finish();
  }));

test('more than a page of schedules is listed whole, by name', () =>
  withQueue(
    async (queue) => {
      const names = Array.from({ length: 130 }, (_, i) => `s${String(i).padStart(3, '0')}`);
      for (const name of [...names].reverse()) await queue.addSchedule(name, 0, { every: 3_600_000 });
      assert.deepEqual((await queue.schedules()).map((schedule) => schedule.name), names);
    },
    { durability: 'normal' },
  ));

test('bad schedules are refused and store nothing', () =>
  withQueue(async (queue) => {
    await queue.addSchedule('taken', 1, { every: 1000 });
    const stored = await queue.schedules();
    for (const [name, payload, options, error, message] of [
      ['x', 1, { cron: 'not a cron' }, tq.InvalidArgumentError, /'not a cron' is not a cron expression/],
      ['x', 1, { cron: '* * * * *', timeZone: 'Mars/Olympus' }, tq.InvalidArgumentError, /'Mars\/Olympus' is not a known IANA time zone/],
      // Refused by tq_schedule_add on a worker thread, which keeps the library's message.
      ['x', 1, { every: 1000, timeZone: 'Europe/Paris' }, tq.InvalidArgumentError, /^tq_schedule_add: /],
      ['x', 1, { every: 0 }, tq.InvalidArgumentError, /interval must be between 1 ms and 366 days/],
      ['x', 1, { every: -1 }, tq.InvalidArgumentError, /every must be at least 0/],
      ['x', 1, { cron: '@daily', every: 1000 }, tq.InvalidArgumentError, /cron or every, exactly one/],
      ['x', 1, {}, tq.InvalidArgumentError, /addSchedule takes cron or every/],
      ['x', 1, undefined, tq.InvalidArgumentError, /addSchedule takes cron or every/],
      ['x', 1, { every: 1000, catchUp: 'sometimes' }, tq.InvalidArgumentError, /unknown catchUp "sometimes"; expected one of skip, one, each/],
      ['x', 1, { every: 1000, catchUp: 'each', catchUpLimit: 0 }, tq.InvalidArgumentError, /bounded by 1 to 10000 slots, got 0/],
      ['x', 1, { every: 1000, catchUpLimit: 3 }, tq.InvalidArgumentError, /catchUpLimit needs catchUp/],
      ['x', 1, { every: 1000, maxAttempts: 0 }, tq.InvalidArgumentError, /max attempts must be at least 1/],
      ['x', 1, { every: 1000, priority: 1.5 }, tq.InvalidArgumentError, /priority must be an integer/],
      ['x', 'not json', { every: 1000 }, tq.InvalidJsonError, /./],
      ['', 1, { every: 1000 }, tq.InvalidArgumentError, /^tq_schedule_add: /],
      ['a'.repeat(201), 1, { every: 1000 }, tq.InvalidArgumentError, /^tq_schedule_add: /],
      ['a\0b', 1, { every: 1000 }, tq.InvalidArgumentError, /contains a NUL character/],
      ['taken', 2, { every: 5000 }, tq.InvalidArgumentError, /^tq_schedule_add: /],
      [7, 1, { every: 1000 }, TypeError, /name must be a string/],
      ['x', 1, { cron: 5 }, TypeError, /cron must be a string/],
      ['x', 1, 'every minute', TypeError, /addSchedule takes an options object/],
    ]) {
      await assert.rejects(async () => queue.addSchedule(name, payload, options), (thrown) => thrown instanceof error && message.test(thrown.message), `${name} ${JSON.stringify(options)}`);
    }
    await assert.rejects(async () => queue.replaceSchedule('taken', 2, { cron: 'nope' }), tq.InvalidArgumentError);
    assert.deepEqual(await queue.schedules(), stored);
    assert.equal(await queue.count(), 0);
  }));

test('schedule calls after close throw ClosedError', async () => {
  let queue;
  await withQueue(async (opened) => {
    queue = opened;
  });
  for (const call of [
    () => queue.addSchedule('x', 1, { every: 1000 }),
    () => queue.schedules(),
    () => queue.removeSchedule('x'),
    () => queue.runDueSchedules(),
  ]) {
    await assert.rejects(call, tq.ClosedError);
  }
});

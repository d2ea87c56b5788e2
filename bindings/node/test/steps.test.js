'use strict';
// Step checkpoints: a step recorded by one delivery is read, not run, by
// the next; snapshots list the steps; a retry may clear those after a step.

const test = require('node:test');
const assert = require('node:assert/strict');
const { tq, withQueue } = require('./helpers');

test('a later delivery reads a step without running it', () =>
  withQueue(
    async (queue) => {
      const id = await queue.push({ order: 7 });
      let runs = 0;
      const charge = async () => {
        runs++;
        return { charge: 'ch_1' };
      };
      const first = await queue.pull();
      assert.deepEqual(await first.step('charge', charge), { charge: 'ch_1' });
      await assert.rejects(
        first.step('mail', async () => {
          throw new Error('the mail server is down');
        }),
        /mail server/,
      );
      await assert.rejects(first.step('bad', () => '{nope'), tq.InvalidJsonError);
      await first.fail('mail failed');

      const second = await queue.pull();
      assert.equal(second.id, id);
      assert.deepEqual(await second.step('charge', charge), { charge: 'ch_1' });
      assert.equal(runs, 1, 'the second delivery did not run the step');
      assert.equal(await second.step('mail', () => 'true'), true, 'a rejected step recorded nothing');
      await second.finish();

      const snapshot = await queue.task(id);
      assert.deepEqual(
        snapshot.steps.map((step) => [step.name, step.rawOutput]),
        [
          ['charge', '{"charge":"ch_1"}'],
          ['mail', 'true'],
        ],
      );
      assert.deepEqual(snapshot.steps[0].output, { charge: 'ch_1' });
      assert.ok(Math.abs(snapshot.steps[1].recordedAt.getTime() - Date.now()) < 60000);
      assert.deepEqual((await queue.list('done'))[0].steps, []);
    },
    { keepHistory: true, retryBackoff: { min: 0, max: 0 } },
  ));

test('a stale delivery records no step, and steps after a named one are cleared for a retry', () =>
  withQueue(
    async (queue) => {
      const id = await queue.push(1);
      const first = await queue.pull({ lease: 30 });
      await first.step('one', () => 1);
      await new Promise((resolve) => setTimeout(resolve, 60));
      const second = await queue.pull();
      await assert.rejects(first.step('two', () => 2), tq.NotHeldError);
      await second.step('two', () => 2);
      await second.step('three', () => 3);
      await assert.rejects(queue.clearStepsAfter(id, 'one'), tq.InvalidArgumentError);
      await second.fail('three went wrong');
      await assert.rejects(queue.clearStepsAfter(id, 'four'), tq.InvalidArgumentError);
      assert.equal(await queue.clearStepsAfter(id, 'one'), 2);
      assert.deepEqual(
        (await queue.task(id)).steps.map((step) => step.name),
        ['one'],
      );
    },
    { keepHistory: true, maxAttempts: 2 },
  ));

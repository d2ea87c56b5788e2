"""Step checkpoints: a step recorded by one delivery is read, not run, by
the next; snapshots list the steps; a retry may clear those after a step."""

import time

import pytest

import tq


def test_a_later_delivery_reads_the_step_without_running_it(path):
    with tq.Queue(path, keep_history=True, retry_backoff=(0, 0)) as queue:
        task_id = queue.push({"order": 7})
        runs = []

        def charge():
            runs.append(1)
            return {"charge": "ch_1"}

        first = queue.pull()
        assert first.step("charge", charge) == {"charge": "ch_1"}
        with first.step("mail") as step:
            assert not step.done
            step.output = {"sent": True}
        with pytest.raises(RuntimeError):
            with first.step("receipt") as step:
                raise RuntimeError("the printer is out of paper")
        first.fail("receipt failed")

        second = queue.pull()
        assert second.id == task_id
        assert second.step("charge", charge) == {"charge": "ch_1"}
        assert len(runs) == 1, "the second delivery did not run the step"
        with second.step("mail") as step:
            assert (step.done, step.output) == (True, {"sent": True})
        with second.step("receipt") as step:
            assert not step.done, "a block that raised recorded nothing"
            step.output = [1, 2]
        second.finish()

        snapshot = queue.task(task_id)
        assert [step.name for step in snapshot.steps] == ["charge", "mail", "receipt"]
        assert snapshot.steps[0].output == {"charge": "ch_1"}
        assert snapshot.steps[1].raw_output == b'{"sent":true}'
        assert abs(snapshot.steps[2].recorded_at.timestamp() - time.time()) < 60
        assert queue.list("done")[0].steps == ()


def test_a_stale_delivery_records_nothing_and_bad_outputs_are_refused(path):
    with tq.Queue(path, keep_history=True) as queue:
        task_id = queue.push(1)
        first = queue.pull(lease=0.03)
        with pytest.raises(tq.InvalidJSONError):
            first.step("bad", lambda: "{nope")
        with pytest.raises(tq.InvalidArgumentError):
            first.step("", lambda: 1)
        time.sleep(0.06)
        second = queue.pull()
        assert second.id == task_id
        with pytest.raises(tq.NotHeldError):
            first.step("charge", lambda: 1)
        assert queue.task(task_id).steps == ()
        second.finish()


def test_steps_after_a_named_step_are_cleared_for_a_retry(path):
    with tq.Queue(path, keep_history=True, max_attempts=1) as queue:
        task_id = queue.push(1)
        task = queue.pull()
        for name in ["one", "two", "three"]:
            task.step(name, lambda: True)
        with pytest.raises(tq.InvalidArgumentError, match="held"):
            queue.clear_steps_after(task_id, "one")
        task.fail("three went wrong")
        with pytest.raises(tq.InvalidArgumentError, match="no step"):
            queue.clear_steps_after(task_id, "four")
        assert queue.clear_steps_after(task_id, "one") == 2
        queue.retry_dead(task_id)
        again = queue.pull()
        assert again.step("two", lambda: False) is False
        assert again.step("one", lambda: False) is True
        assert [step.name for step in queue.task(task_id).steps] == ["one", "two"]

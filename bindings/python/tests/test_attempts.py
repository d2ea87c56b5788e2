"""Attempts: a snapshot lists the deliveries that ended without finishing
the task, oldest first, with their reasons, holders and times."""

import os
import time

import tq


def test_a_snapshot_lists_the_ended_attempts(path):
    with tq.Queue(path, keep_history=True, retry_backoff=(0, 0), max_attempts=3) as queue:
        task_id = queue.push({"order": 7})
        queue.pull().fail("HTTP 502")
        queue.pull(lease=0.03)
        time.sleep(0.06)
        queue.pull().fail("HTTP 503")

        snapshot = queue.task(task_id)
        attempts = snapshot.ended_attempts
        assert [(a.attempt, a.outcome) for a in attempts] == [
            (1, "failed"),
            (2, "lease expired"),
            (3, "failed"),
        ]
        assert attempts[0].reason == "HTTP 502"
        assert "expired" in attempts[1].reason
        assert attempts[2].reason == "HTTP 503"
        for attempt in attempts:
            assert attempt.holder_id is not None
            assert attempt.holder_pid == os.getpid()
            assert attempt.started_at <= attempt.ended_at
        assert (attempts[1].ended_at - attempts[1].started_at).total_seconds() >= 0.03
        assert tq.ATTEMPTS_KEPT == 20
        # A page of a list reads none.
        assert queue.list(tq.State.DEAD)[0].ended_attempts == ()


def test_a_finished_task_has_none(path):
    with tq.Queue(path, keep_history=True) as queue:
        task_id = queue.push(1)
        queue.pull().finish()
        assert queue.task(task_id).ended_attempts == ()

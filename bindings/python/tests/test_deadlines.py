"""Expiries and deadlines: a pull never delivers a task whose limit has
passed, and ends it as dead."""

import datetime
import time

import pytest

import tq


def test_an_expired_task_is_ended_by_the_pull_which_takes_the_next(path):
    with tq.Queue(path, keep_history=True) as queue:
        expiry = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=1)
        expiry = expiry.replace(microsecond=expiry.microsecond // 1000 * 1000)
        expired = queue.push('"late"', expire_at=expiry, deadline_after=3600)
        following = queue.push('"next"')
        snapshot = queue.task(expired)
        assert snapshot.expires_at == expiry
        assert snapshot.deadline > expiry
        assert queue.task(following).expires_at is None

        task = queue.pull()
        assert task.id == following
        assert task.expires_at is None  # a delivery carries no limits
        task.finish()
        ended = queue.task(expired)
        assert (ended.state, ended.last_error) == (tq.State.DEAD, "expired")


def test_a_deadline_passed_ends_the_retries(path):
    with tq.Queue(path, keep_history=True, retry_backoff=(0, 0)) as queue:
        task_id = queue.push(1, deadline_after=datetime.timedelta(milliseconds=200))
        queue.pull().fail("once")
        deadline = queue.task(task_id).deadline
        while datetime.datetime.now(datetime.timezone.utc) <= deadline:
            time.sleep(0.01)
        assert queue.pull() is None
        ended = queue.task(task_id)
        assert (ended.state, ended.last_error) == (tq.State.DEAD, "deadline passed")


def test_limits_given_both_ways_or_before_the_run_time_are_refused(queue):
    with pytest.raises(tq.InvalidArgumentError, match="not both"):
        queue.push(1, expire_after=1, expire_at=time.time() + 5)
    with pytest.raises(tq.InvalidArgumentError, match="not both"):
        queue.push(1, deadline_after=1, deadline_at=time.time() + 5)
    with pytest.raises(tq.InvalidArgumentError, match="could never run"):
        queue.push(1, delay=60, expire_after=1)
    with pytest.raises(TypeError, match="deadline_at"):
        queue.push(1, deadline_at="tomorrow")

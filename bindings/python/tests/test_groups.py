"""Ordered groups: at most group_max of a group delivered at once, in push order for 1."""

import pytest

import tq


def test_a_group_runs_one_at_a_time_in_push_order_beside_others(queue):
    a1 = queue.push({"a": 1}, group="a")
    b1 = queue.push({"b": 1}, group="b")
    a2 = queue.push({"a": 2}, group="a", priority=10)
    assert queue.groups_waiting() == 1
    first = [queue.pull(), queue.pull()]
    assert [task.id for task in first] == [a1, b1]
    assert queue.pull() is None
    snapshot = queue.task(a2)
    assert (snapshot.group, snapshot.waiting_for, snapshot.parents) == ("a", (a1,), ())
    assert first[0].group is None, "a pulled task does not carry its group"
    for task in first:
        task.finish()
    task = queue.pull()
    assert task.id == a2
    assert queue.groups_waiting() == 0


def test_group_max_and_batches_chain_the_group(queue):
    ids = queue.push_many([1, 2, 3, 4], group="k", group_max=2)
    held = [queue.pull(), queue.pull()]
    assert [task.id for task in held] == ids[:2]
    assert queue.pull() is None
    held[0].finish()
    assert queue.pull().id == ids[2]
    first, second = queue.push_items([tq.Item(5, group="i"), tq.Item(6, group="i")])
    assert queue.task(second).waiting_for == (first,)


def test_bad_groups_are_refused_and_store_nothing(queue):
    too_long = "k" * (tq.MAX_UNIQUE_KEY_LEN + 1)
    for group, group_max in [("", 1), (too_long, 1), ("g", 0), ("g", tq.MAX_GROUP_AT_ONCE + 1)]:
        with pytest.raises(tq.InvalidArgumentError):
            queue.push(1, group=group, group_max=group_max)
    with pytest.raises(tq.InvalidArgumentError, match="group_max needs a group"):
        queue.push(1, group_max=2)
    assert queue.counts()["pending"] == 0

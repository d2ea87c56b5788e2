"""Tasks that wait for other tasks, and graphs pushed in one call."""

import pytest

import tq


def test_a_task_waits_for_its_parents_and_knows_them(queue):
    first = queue.push(1)
    second = queue.push(2)
    join = queue.push({"join": 1}, after=[second, first])
    snapshot = queue.list("pending")[-1]
    assert (snapshot.id, snapshot.waiting_for, snapshot.parents) == (join, (first, second), ())
    a, b = queue.pull(), queue.pull()
    assert queue.pull() is None
    a.finish()
    assert queue.pull() is None
    b.finish()
    task = queue.pull()
    assert (task.id, task.parents, task.waiting_for) == (join, (first, second), ())
    with pytest.raises(tq.InvalidArgumentError, match="no task"):
        queue.push(1, after=[join + 100])


def test_a_graph_is_pushed_whole_or_not_at_all(path):
    with tq.Queue(path, max_attempts=1) as queue:
        with pytest.raises(tq.InvalidArgumentError) as refused:
            queue.push_items([tq.Item({"root": 1}), tq.Item({"child": 1}, after_items=[1])])
        assert refused.value.index == 1
        assert queue.counts()["pending"] == 0
        root, cancelled, anyway = queue.push_items(
            [
                tq.Item({"root": 1}),
                tq.Item({"cancelled": 1}, after_items=[0]),
                tq.Item({"anyway": 1}, after_items=[0], run_anyway=True),
            ]
        )
        queue.pull().fail("broken")
        task = queue.pull()
        assert (task.id, task.parents) == (anyway, (root,))
        assert queue.counts()["pending"] == 0
        assert cancelled not in [snapshot.id for snapshot in queue.list("pending")]

"""Periodic schedules: added, listed, replaced, paused and removed; their
slots enqueued by pulls and by run_due_schedules; bad input refused with
nothing stored."""

import time

import pytest

import tq


def test_a_schedule_is_added_listed_replaced_and_removed(queue):
    queue.add_schedule(
        "nightly",
        {"report": True},
        cron="0 2 * * *",
        time_zone="Europe/Paris",
        priority=3,
        max_attempts=2,
        catch_up="each",
        catch_up_limit=5,
    )
    queue.add_schedule("often", [1], every=60)
    nightly, often = queue.schedules()
    assert nightly.name == "nightly"
    assert (nightly.cron, nightly.every, nightly.time_zone) == ("0 2 * * *", None, "Europe/Paris")
    assert nightly.payload == {"report": True}
    assert (nightly.priority, nightly.max_attempts) == (3, 2)
    assert (nightly.catch_up, nightly.catch_up_limit) == (tq.CatchUp.EACH, 5)
    assert not nightly.paused and nightly.next_slot > time.time()
    assert (often.cron, often.every, often.catch_up) == (None, 60.0, tq.CatchUp.ONE)
    assert often.max_attempts == tq.DEFAULT_MAX_ATTEMPTS

    with pytest.raises(tq.InvalidArgumentError, match="'often'"):
        queue.add_schedule("often", [2], every=1)
    queue.replace_schedule("often", [2], every=1)
    assert queue.schedules()[1].payload == [2]
    # Declared again unchanged at a later start: the next slot stays.
    slot = queue.schedules()[1].next_slot
    time.sleep(0.02)
    queue.upsert_schedule("often", [2], every=1)
    assert queue.schedules()[1].next_slot == slot
    queue.remove_schedule("nightly")
    with pytest.raises(tq.InvalidArgumentError, match="no schedule named 'nightly'"):
        queue.remove_schedule("nightly")
    assert [schedule.name for schedule in queue.schedules()] == ["often"]


def test_many_schedules_are_listed_page_after_page(queue):
    names = [f"s{n:03}" for n in range(130)]
    for name in names:
        queue.add_schedule(name, 1, every=3600)
    assert [schedule.name for schedule in queue.schedules()] == names


def test_bad_input_is_refused_naming_it_and_stores_nothing(queue):
    with pytest.raises(tq.InvalidArgumentError, match="'61 \\* \\* \\* \\*'"):
        queue.add_schedule("bad", 1, cron="61 * * * *")
    with pytest.raises(tq.InvalidArgumentError, match="'Mars/Olympus'"):
        queue.add_schedule("bad", 1, cron="@daily", time_zone="Mars/Olympus")
    with pytest.raises(tq.InvalidArgumentError, match="cron or every"):
        queue.add_schedule("bad", 1)
    with pytest.raises(tq.InvalidArgumentError, match="cron or every"):
        queue.add_schedule("bad", 1, cron="@daily", every=1)
    with pytest.raises(tq.InvalidJSONError):
        queue.add_schedule("bad", b"not json", every=1)
    with pytest.raises(tq.InvalidArgumentError):
        queue.add_schedule("bad", 1, every=1, catch_up="each", catch_up_limit=0)
    with pytest.raises(tq.InvalidArgumentError, match="unknown catchup"):
        queue.add_schedule("bad", 1, every=1, catch_up="sometimes")
    assert queue.schedules() == []
    with pytest.raises(tq.InvalidArgumentError):
        queue.pause_schedule("missing")


def test_a_waiting_pull_takes_each_slot_once_at_its_time(queue):
    queue.add_schedule("tick", {"tick": 1}, every=0.2, catch_up="each", catch_up_limit=100)
    started = time.monotonic()
    slots = []
    while time.monotonic() - started < 1.1:
        task = queue.pull(timeout=0.5)
        if task is not None:
            assert task.payload == {"tick": 1}
            slots.append(task.run_at.timestamp())
            task.finish()
    assert len(slots) >= 4
    gaps = {round(b - a, 3) for a, b in zip(slots, slots[1:])}
    assert gaps == {0.2}


def test_a_paused_schedule_enqueues_nothing_until_resumed(queue):
    queue.add_schedule("tick", 1, every=0.1, catch_up=tq.CatchUp.EACH, catch_up_limit=100)
    queue.pause_schedule("tick")
    assert queue.schedules()[0].paused
    time.sleep(0.35)
    assert queue.run_due_schedules() == 0
    queue.resume_schedule("tick")
    time.sleep(0.25)
    assert 1 <= queue.run_due_schedules() <= 3

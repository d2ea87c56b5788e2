"""The shortest worker: push a task, then pull and finish tasks until none
is ready.

    make example-python                                  (from the repository root)
    python3 examples/python/quickstart.py [QUEUE_FILE]   (tq installed; default jobs.db)
"""

import sys

import tq

with tq.Queue(sys.argv[1] if len(sys.argv) > 1 else "jobs.db") as queue:
    queue.recover()  # take back what crashed workers held
    queue.push({"file": "a.mp4"})
    task = queue.pull()  # None when no task is ready
    while task is not None:
        print(f"task {task.id}: {task.payload}")
        task = task.finish_and_pull()  # one commit: finish this task, claim the next

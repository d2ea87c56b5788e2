"""The prototype's scenario with tq: push 100 tasks, then four threads pull
and finish them until none is left, each "working" 10 ms on a task.

    make example-python                          (from the repository root)
    python3 examples/python/blog_example.py [QUEUE_FILE]   (tq installed,
                                                  or TQ_LIBRARY and PYTHONPATH set)

QUEUE_FILE defaults to tasks.db, created if needed. Prints how many tasks
are left (0) and how many each thread finished.
"""

import sys
import threading
import time

import tq

TASKS = 100
THREADS = 4


def blog_example(db_path="tasks.db"):
    with tq.Queue(db_path) as queue:
        queue.recover()  # take back what crashed workers held
        queue.push_many({"index": i, "sleep": 0.01} for i in range(TASKS))  # one transaction

        finished = [0] * THREADS

        def worker(worker_id):
            task = queue.pull()
            while task is not None:
                time.sleep(task.payload["sleep"])
                # One commit finishes this task and claims the next (None when
                # no task is left).
                following = task.finish_and_pull()
                finished[worker_id] += 1
                task = following

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("pending left:", queue.count("pending"))
        print("finished per thread:", finished)


if __name__ == "__main__":
    blog_example(*sys.argv[1:2])

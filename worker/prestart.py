"""A worker process started ahead of its embedded cluster (see producer/prestart.py).

It imports the heavy modules at once (worker/warmup.py) while it waits on stdin for one JSON
line: the worker's Celery arguments, its environment (the private Redis, the store, the work
folder: what ``EmbeddedCluster`` would have given a worker it spawned) and its log file. Then it
becomes that worker in this process. End-of-file instead means the command went on without a
cluster: the process exits at once.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    from worker.warmup import start_warmup

    start_warmup()
    line = sys.stdin.buffer.readline()
    if not line:
        os._exit(0)  # nothing to become; the import thread is not worth finishing
    order = json.loads(line)
    os.environ.clear()
    os.environ.update(order["env"])
    log = os.open(order["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # nothing the worker runs inherits the command's pipe
    os.close(null)
    sys.argv = ["celery", *order["argv"]]
    from celery.__main__ import main as celery_main

    celery_main()


if __name__ == "__main__":
    main()

"""Executing submissions on a Dask distributed cluster (``course grade --scheduler ADDRESS``).

Only execution leaves this machine: each task is :func:`grader.execute.watchdog.run_one` on one
prepared notebook (no gradebook handle, no solutions), run by whichever worker is free. The
coordinator gathers results as they complete and writes the gradebook itself, so the
gradebook needs no network access from the workers.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Iterator

log = logging.getLogger(__name__)


def execute_all(todo: Iterable[tuple], address: str, engine: str,
                on_idle: Callable[[], None] = lambda: None) -> Iterator[tuple]:
    """Yield (submission, fingerprint, outcome or exception) as the cluster finishes each.

    Args:
        todo: (submission, notebook JSON, fingerprint, options, findings) per submission.
        address: the scheduler, e.g. ``tcp://10.0.0.5:8786``.
        engine: the engine the workers run (``fork`` or ``kernel``).
        on_idle: called before waiting for the cluster with no result ready.
    """
    from distributed import Client, as_completed

    from grader.execute.watchdog import run_one

    items = iter(todo)
    first = next(items, None)
    if first is None:
        return
    with Client(address, timeout="60s") as client:
        log.info("executing on %s (%d worker thread(s))", address, sum(client.nthreads().values()))
        pending = {}
        for sub, nb, fp, options, findings in itertools.chain([first], items):
            # pure=False: two identical notebooks are still two submissions to execute
            future = client.submit(run_one, (nb, options, findings, engine), pure=False,
                                   key=f"grade-{sub.student}-{sub.chapter}-{fp[:8]}")
            pending[future] = (sub, fp)
            for done in [f for f in pending if f.done()]:  # record results while preparing the rest
                yield _outcome(done, *pending.pop(done))
        finished = as_completed(list(pending))
        while pending:
            if not finished.has_ready():
                on_idle()
            done = next(finished)
            yield _outcome(done, *pending.pop(done))


def _outcome(future, sub, fp) -> tuple:
    try:
        return sub, fp, future.result()
    except Exception as exc:  # the task failed on its worker (or the worker was lost)
        return sub, fp, exc

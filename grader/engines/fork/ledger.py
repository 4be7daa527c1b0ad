"""A fork child's ledger: the file a child writes each cell's progress and result into, for the coordinator.

The coordinator sends a child a run of cells in one request (:meth:`grader.engines.fork.child.Child.run`).
Before each cell the child writes which cell of the run it is on, in which phase (the tamper
guard, then the cell) and since when (``CLOCK_MONOTONIC``, which the sandbox's namespaces share);
after each cell it appends the cell's result as a record (a 4-byte length, then JSON, as on the
wire). The coordinator reads the progress only when a cell's time is up, and the records once
the run has ended or the child died: the results of the cells before a death survive it, and a
run costs the coordinator one wake-up rather than one per cell.

The file is a memfd the child creates before any learner code runs and hands over with its
greeting. Learner code can write anything into it: the coordinator reads it with caps, parses
it defensively, clamps what it says about time, and nothing in it decides a score.
"""

from __future__ import annotations

import logging
import os
import struct
import time

from grader import jsonio
from grader.engines.fork.wire import HEADER, MAX_MESSAGE, frame

log = logging.getLogger(__name__)

#: the cell of the run the child is on, its phase, and since when (ns of CLOCK_MONOTONIC)
PROGRESS = struct.Struct("<iiq")
#: the cell the coordinator interrupts (SIGINT stops only that one: never the next, by a race)
STOP = struct.Struct("<i")
STOP_AT = 16
RECORDS_AT = 64
GUARD, CELL = 1, 2
#: bytes of records the coordinator reads from one run (a record alone: :data:`MAX_MESSAGE`)
MAX_RUN = 2 * MAX_MESSAGE


class Writer:
    """The child's side."""

    def __init__(self) -> None:
        self.fd = os.memfd_create("course-ledger")
        self.index = -1
        self.end = RECORDS_AT
        self.reset()

    def reset(self) -> None:
        """A new run: no records yet."""
        os.ftruncate(self.fd, RECORDS_AT)
        self.end, self.index = RECORDS_AT, -1

    def begin(self, index: int, phase: int) -> None:
        self.index = index
        os.pwrite(self.fd, PROGRESS.pack(index, phase, time.monotonic_ns()), 0)

    def stop_asked(self) -> bool:
        """Whether the coordinator interrupts the cell running now."""
        data = os.pread(self.fd, STOP.size, STOP_AT)
        return len(data) == STOP.size and STOP.unpack(data)[0] == self.index

    def record(self, message: dict) -> None:
        data = frame(message)
        os.pwrite(self.fd, data, self.end)
        self.end += len(data)


class Reader:
    """The coordinator's side: ``fd`` came from an untrusted process."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def start(self) -> None:
        """Before a run is sent: no progress, no cell to stop (nothing left from an earlier run)."""
        os.pwrite(self.fd, PROGRESS.pack(-1, 0, 0) + STOP.pack(-1), 0)

    def stop(self, index: int) -> None:
        os.pwrite(self.fd, STOP.pack(index), STOP_AT)

    def progress(self) -> tuple[int, int, float] | None:
        """(cell, phase, since as a ``time.monotonic()`` value) as the child wrote it, or None."""
        try:
            data = os.pread(self.fd, PROGRESS.size, 0)
        except OSError:
            return None
        if len(data) != PROGRESS.size:
            return None
        index, phase, since = PROGRESS.unpack(data)
        return index, phase, since / 1e9

    def records(self, cells: int) -> tuple[list[dict], list | None]:
        """The results of the run's first cells, in order (at most ``cells``), and what the cell
        after them showed before an interrupt (its last partial record), if anything.

        Reading stops at the first record that is too long, cut short or not a JSON object: that
        cell and those after it have no result.
        """
        results: list[dict] = []
        partial = None
        try:
            size = os.fstat(self.fd).st_size
            data = os.pread(self.fd, max(0, min(size - RECORDS_AT, MAX_RUN)), RECORDS_AT)
        except OSError:
            return results, partial
        view, at = memoryview(data), 0
        while len(results) < cells and at + HEADER.size <= len(view):
            (length,) = HEADER.unpack_from(view, at)
            at += HEADER.size
            if length > MAX_MESSAGE or at + length > len(view):
                break
            try:
                message = jsonio.loads(bytes(view[at:at + length]))
            except (ValueError, UnicodeDecodeError):
                break
            at += length
            if not isinstance(message, dict):
                break
            if "partial" in message:
                partial = message["partial"]
            else:
                results.append(message)
                partial = None
        return results, partial


def since(claimed: float, earliest: float, now: float) -> float:
    """When a cell began, from what the child claims: never before what was known, never later than now."""
    return min(max(claimed, earliest), now)

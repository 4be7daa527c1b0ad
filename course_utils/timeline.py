"""A timeline of launching work and running it: what a clock read with and without synchronising measures."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from course_utils.pictures import _BLUE, _GREY, _ORANGE, _wrap

#: How many calls a timeline records by default: enough to see the queue, few enough to read.
CALLS = 4


@dataclass
class Timeline:
    """One recorded run of ``calls`` launches, in seconds from the moment the clock started.

    Attributes:
        launches: (start, end) of each call on the CPU: the time the Python call took to return.
        runs: (start, end) of each call's work where it ran (the GPU, or the stand-in's worker).
        clock_without_sync: the clock read right after the last call returned.
        clock_with_sync: the clock read after waiting for all the work to finish.
        measured: True when ``runs`` were measured on a CUDA GPU with CUDA events; False when a
            worker thread stood in for the GPU's queue (a schematic of what a GPU does).
        device: the device the work ran on.
    """

    launches: list[tuple[float, float]]
    runs: list[tuple[float, float]]
    clock_without_sync: float
    clock_with_sync: float
    measured: bool
    device: str


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def record_timeline(fn: Callable[[], Any], device: Any = "cpu", calls: int = CALLS) -> Timeline:
    """Call ``fn`` ``calls`` times in a row, reading the clock before waiting and after, and record when
    each call was launched and when its work ran.

    On CUDA the work's times come from CUDA events recorded around each call (a launch's time includes
    recording them), measured from an event recorded just after the clock started. Elsewhere nothing is queued (a CPU call returns when its work
    is done), so a one-worker thread pool stands in for the GPU's queue: each launch submits ``fn``
    to it and returns, and the worker runs the calls one after the other.

    Args:
        fn: the work of one call, e.g. ``lambda: X @ X``; called once first, untimed, to warm up.
        device: where ``fn``'s tensors live (``DEVICE``).
        calls: how many calls to record.

    Returns:
        A :class:`Timeline`.
    """
    device = torch.device(device)
    fn()  # warm up: the first call pays for set-up, which is not what this picture is about
    _sync(device)
    launches: list[tuple[float, float]] = []
    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(calls)]
        start.record()  # warm up the events too: a first record costs tens of microseconds
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        start.record()  # after t0: the GPU reaches it no earlier than the clock started
        for begin, end in events:
            b = time.perf_counter() - t0
            begin.record()
            fn()
            end.record()
            launches.append((b, time.perf_counter() - t0))
        without_sync = time.perf_counter() - t0
        torch.cuda.synchronize(device)
        with_sync = time.perf_counter() - t0
        gpu = [(start.elapsed_time(b) / 1e3, start.elapsed_time(e) / 1e3) for b, e in events]
        return Timeline(launches, gpu, without_sync, with_sync, True, str(device))

    runs: list[tuple[float, float]] = []

    def job() -> None:
        b = time.perf_counter() - t0
        fn()
        _sync(device)
        runs.append((b, time.perf_counter() - t0))

    with ThreadPoolExecutor(max_workers=1) as worker:  # a stand-in for the GPU's queue
        worker.submit(lambda: None).result()  # start the worker thread before the clock does
        t0 = time.perf_counter()
        futures = []
        for _ in range(calls):
            b = time.perf_counter() - t0
            futures.append(worker.submit(job))
            launches.append((b, time.perf_counter() - t0))
        without_sync = time.perf_counter() - t0
        for future in futures:  # "synchronize": wait for every queued call
            future.result()
        with_sync = time.perf_counter() - t0
    return Timeline(launches, runs, without_sync, with_sync, False, str(device))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def show_timeline(timeline: Timeline, title: str | None = None) -> Any:
    """Draw a :class:`Timeline`: the CPU's launches on one lane, the work on the other, and where each
    clock reading stops.

    A dotted arrow joins each launch to its work. The CPU lane shows, after the launches, the wait
    of the synchronisation. Two lines mark the clock readings, each with the interval it measures:
    without synchronising it covers only the launches; with it, the work.

    Args:
        timeline: what :func:`record_timeline` recorded.
        title: a title; by default it says whether the picture was measured on a GPU or is a schematic.

    Returns:
        The matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    t = timeline
    scale = 1e3  # draw in milliseconds
    end = max(t.clock_with_sync, max((e for _, e in t.runs), default=0.0)) * scale
    cpu_y, gpu_y, h = 2.0, 0.8, 0.6
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for k, (b, e) in enumerate(t.launches):
        ax.broken_barh([(b * scale, max((e - b) * scale, end * 0.004))], (cpu_y, h), facecolors=_BLUE,
                       edgecolors="black", linewidth=0.6, gid="launch")
        rb = t.runs[k][0] * scale  # the arrow leaves its launch no later than the work started
        ax.annotate("", xy=(rb, gpu_y + h), xytext=(min((b + e) / 2 * scale, rb), cpu_y),
                    arrowprops={"arrowstyle": "->", "color": "dimgray", "linestyle": ":", "shrinkA": 0,
                                "shrinkB": 0})
    for k, (b, e) in enumerate(t.runs):
        ax.broken_barh([(b * scale, (e - b) * scale)], (gpu_y, h), facecolors=_ORANGE, edgecolors="black",
                       linewidth=0.6, gid="run")
        ax.text((b + e) / 2 * scale, gpu_y + h / 2, f"call {k + 1}", ha="center", va="center", fontsize=8)
    wait = (t.clock_without_sync * scale, (t.clock_with_sync - t.clock_without_sync) * scale)
    ax.broken_barh([wait], (cpu_y, h), facecolors=_GREY, edgecolors="gray", hatch="//", linewidth=0.6,
                   gid="wait")
    ax.text(wait[0] + wait[1] / 2, cpu_y + h / 2, "synchronize(): waits for the work", ha="center",
            va="center", fontsize=8, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    spent = sum(e - b for b, e in t.launches)
    ax.annotate(f"{len(t.launches)} launches: {_ms(spent)} in all", xy=(t.launches[0][0] * scale, cpu_y + h),
                xytext=(t.clock_without_sync * scale + end * 0.012, cpu_y + h + 0.3), ha="left", va="bottom", fontsize=8,
                arrowprops={"arrowstyle": "->", "color": "black", "shrinkA": 0, "shrinkB": 0})
    for x, y, colour, text in (
        (t.clock_without_sync, -0.15, "firebrick", f"clock read without synchronize(): {_ms(t.clock_without_sync)},"
         " only the launches"),
        (t.clock_with_sync, -0.65, "darkgreen", f"clock read after synchronize(): {_ms(t.clock_with_sync)},"
         " the work"),
    ):
        ax.axvline(x * scale, color=colour, linestyle="--", linewidth=1.2, gid="clock")
        ax.annotate("", xy=(x * scale, y), xytext=(0, y),
                    arrowprops={"arrowstyle": "<->", "color": colour, "shrinkA": 0, "shrinkB": 0})
        ax.text(t.clock_without_sync * scale + end * 0.012, y - 0.08, text, ha="left", va="top", fontsize=8, color=colour)
    work_lane = "GPU" if t.measured else "worker thread\n(stand-in\nfor the GPU)"
    ax.set_yticks([cpu_y + h / 2, gpu_y + h / 2], ["CPU (Python)", work_lane])
    ax.set_ylim(-1.3, cpu_y + h + 0.75)
    ax.set_xlim(-end * 0.02, end * 1.03)
    ax.set_xlabel("time since the clock started (ms)")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0)
    if title is None:
        title = (f"Measured on {t.device}: CUDA events place the GPU's work" if t.measured else
                 f"Schematic: on {t.device} nothing is queued, so a worker thread stands in for the"
                 " GPU's queue (the launches and the work are measured)")
    ax.set_title(_wrap(title, fig), fontsize=10)
    fig.tight_layout()
    return fig

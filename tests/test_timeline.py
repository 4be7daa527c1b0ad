"""course_utils.timeline: a clock read before waiting stops at the launches; after waiting, it covers the work."""

from __future__ import annotations

import itertools
import time

import matplotlib

matplotlib.use("Agg")  # headless, as under CI and papermill

import pytest  # noqa: E402
import torch  # noqa: E402

from course_utils.timeline import CALLS, Timeline, record_timeline, show_timeline  # noqa: E402


def bars(fig, role: str) -> list[float]:
    """start, width, start, width, ... of the bars drawn with ``role``, in ms."""
    out = []
    for collection in fig.axes[0].collections:
        if collection.get_gid() == role:
            for path in collection.get_paths():
                xs = path.vertices[:, 0]
                out += [xs.min(), xs.max() - xs.min()]
    return out


def test_on_the_cpu_a_worker_thread_runs_the_calls_in_order_after_their_launches():
    timeline = record_timeline(lambda: time.sleep(0.01), "cpu")
    assert not timeline.measured and timeline.device == "cpu"
    assert len(timeline.launches) == len(timeline.runs) == CALLS
    for (launched, _), (start, end) in zip(timeline.launches, timeline.runs, strict=True):
        assert launched <= start and end - start >= 0.01  # each call's work is the 10 ms sleep
    for (_, end), (start, _) in itertools.pairwise(timeline.runs):
        assert end <= start  # one worker: a queue, one call after the other
    assert timeline.clock_without_sync < timeline.runs[-1][1] <= timeline.clock_with_sync
    assert timeline.clock_with_sync >= CALLS * 0.01


def test_the_picture_draws_each_launch_and_run_and_the_two_clock_readings():
    timeline = Timeline(launches=[(0.0, 0.0001), (0.0001, 0.0002)], runs=[(0.0001, 0.003), (0.003, 0.006)],
                        clock_without_sync=0.0002, clock_with_sync=0.0061, measured=False, device="cpu")
    fig = show_timeline(timeline)
    ax = fig.axes[0]
    assert bars(fig, "run") == pytest.approx([0.1, 2.9, 3.0, 3.0])
    assert bars(fig, "launch")[::2] == pytest.approx([0.0, 0.1])
    assert bars(fig, "wait") == pytest.approx([0.2, 5.9])  # synchronize() waits from the first reading
    clocks = [line.get_xdata()[0] for line in ax.lines if line.get_gid() == "clock"]
    assert clocks == pytest.approx([0.2, 6.1])
    words = " ".join(t.get_text() for t in ax.texts)
    assert "without synchronize(): 0.2 ms, only the launches" in words
    assert "after synchronize(): 6.1 ms, the work" in words
    assert ax.get_title().startswith("Schematic: on cpu")
    assert [t.get_text() for t in ax.get_yticklabels()][1].startswith("worker thread")
    fig.canvas.draw()


def test_a_measured_timeline_says_so_and_names_the_gpu_lane():
    timeline = Timeline(launches=[(0.0, 0.00001)], runs=[(0.00001, 0.001)], clock_without_sync=0.00002,
                        clock_with_sync=0.0011, measured=True, device="cuda:0")
    ax = show_timeline(timeline).axes[0]
    assert ax.get_title().startswith("Measured on cuda:0")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["CPU (Python)", "GPU"]


@pytest.mark.gpu  # `make gpu-check` runs it on a GPU machine
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA events need a CUDA GPU")
def test_on_cuda_the_gpu_lane_comes_from_events_and_outlasts_the_launches():
    x = torch.randn(2048, 2048, device="cuda")
    timeline = record_timeline(lambda: x @ x, "cuda")
    assert timeline.measured
    assert timeline.clock_without_sync < timeline.runs[-1][1] <= timeline.clock_with_sync
    for (_, end), (start, _) in itertools.pairwise(timeline.runs):
        assert end <= start + 1e-6  # the GPU runs its queue in order

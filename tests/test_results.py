"""The recorder: a batch's reports recorded a few at a time, never one transaction per submission."""

from __future__ import annotations

from pathlib import Path

from grader.intake.workspace import Workspace
from grader.record import gradebook as gbmod
from grader.record import results as record
from grader.record import scores
from grader.verdict.outcome import Report

SOURCE = Path(__file__).parent / "fixtures" / "course" / "solutions" / "00_mini" / "mini.ipynb"


def test_results_that_come_one_at_a_time_are_recorded_once_per_wait_not_once_per_submission(tmp_path, monkeypatch):
    """The coordinator is idle between results on the fork path: each idle moment records what waits
    only once a result of each worker (``idle_batch``) waits or the oldest has waited the recorder's
    ``wait``; every report is recorded in the end."""
    db = f"sqlite:///{tmp_path / 'gradebook.db'}"
    gbmod.check(db, create=True)
    gbmod.register_chapter(db, SOURCE.parent.name, SOURCE)
    now = [100.0]
    monkeypatch.setattr(record.time, "monotonic", lambda: now[0])
    saves = []
    real = scores.save
    monkeypatch.setattr(scores, "save", lambda url, items: saves.append(len(items)) or real(url, items))
    seen: list[Report] = []
    recorder = record.Recorder(Workspace(tmp_path / "work"), db, seen.append, wait=0.5, idle_batch=4)
    for k in range(10):  # a result every 0.1 s, the coordinator idle in between
        recorder.add(Report(f"s{k}", SOURCE.parent.name, "graded"), SOURCE)
        recorder.idle()
        now[0] += 0.1
    recorder.flush()  # the batch's end
    assert sum(saves) == 10 and len(seen) == 10
    assert len(saves) <= 3, f"one transaction per submission, or nearly: {saves}"
    assert all((tmp_path / "work").rglob(f"s{k}*") for k in range(10))

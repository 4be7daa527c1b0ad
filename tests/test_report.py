"""The class report reads at a glance: a row per student first, then each chapter's numbers and
hardest tests with legible figures, one review row per submission; nothing learner-made opens
markup in either medium. The workspaces here are fabricated result files (as grader/record/results.py
writes them), so nothing is graded."""

from __future__ import annotations

import base64
import json
import random
import re
from pathlib import Path

import mistune
import pytest

from grader.escaping import html_text, md_cell
from grader.pages import report, report_plot

#: The course's chapters and their tests' points, as the real release has them.
COURSE = {
    "01_tensors": {"checkerboard": 20, "element_offset": 25, "ensemble_predict": 25, "sample_rows": 30,
                   "minmax_rows": 0, "attention_scores": 0, "where_is_max": 0},
    "02_dtypes": {"tensor_bytes": 20, "smallest_int_dtype": 25, "to_class_indices": 25, "result_dtype": 30,
                  "safe_cast": 0, "quantize_int8": 0},
    "03_numpy_bridge": {"to_numpy": 25, "float32_copy": 25, "shares_memory": 25, "to_training_tensors": 25,
                        "accepts_numpy": 0, "sliding_windows": 0},
    "04_reshape_indexing": {"to_channels_first": 10, "flatten_batch": 10, "target_probs": 15,
                            "mask_and_replace": 15, "topk_mask": 20, "patchify": 30},
    "05_broadcasting": {"times_table": 10, "broadcast_shape": 15, "r2_score": 15, "standardize_columns": 15,
                        "softmax": 20, "pairwise_sq_dists": 25},
    "06_autograd": {"grad_sin_square": 10, "central_difference": 15, "first_and_second": 15,
                    "micro_batch_grad": 15, "swish_function": 15, "value_engine": 30},
    "07_devices": {"choose_device": 10, "param_bytes": 15, "masked_mean": 15, "to_device": 15,
                   "positional_encoding": 20, "median_time": 25},
    "08_training_loop": {"steps_per_epoch": 10, "fit_line": 15, "make_mlp": 15, "rescale": 15, "evaluate": 20,
                         "train_one_epoch": 25},
}


def chapter_tests(chapter: str) -> dict[str, float]:
    return {f"test_ex{i}_{name}": float(p) for i, (name, p) in enumerate(COURSE[chapter].items(), 1)}


def fabricate(work: Path, student: str, chapter: str, passed: set[str] | None = None, *, status: str = "graded",
              name: str | None = None, late: bool = False, message: str = "", notes: dict[str, str] | None = None,
              tests: dict[str, float] | None = None) -> dict:
    """Write ``results/<student>/<chapter>.json`` as grader/record/results.py writes it; ``passed``: the
    tests passed (all when None). A submission not graded has every test "not run", scoring 0."""
    tests = tests if tests is not None else chapter_tests(chapter)
    passed = set(tests) if passed is None else passed
    notes = notes or {}
    rows = []
    for gid, points in tests.items():
        ok = status == "graded" and gid in passed
        rows.append({"grade_id": gid, "points": points if ok else 0.0, "max_points": points,
                     "status": "passed" if ok else "failed" if status == "graded" else "not run",
                     "reason": "" if ok else message or "the values differ", "note": notes.get(gid, "")})
    result = {"student": student, "chapter": chapter, "status": status,
              "score": sum(t["points"] for t in rows), "max_score": sum(tests.values()), "message": message,
              "tests": rows, "fingerprint": "f" * 16, "cached": False, "name": name, "late": late}
    path = work / "results" / student / f"{chapter}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


FIRST = ["Ada", "Ben", "Chloé", "Dmitri", "Emeka", "Fatima", "Gus", "Hana", "Ivo", "Jun", "Kofi", "Lena", "Mateo",
         "Nia", "Oren", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Vik", "Wen", "Xavi", "Yara", "Zed"]
PATCH = "for review: the code replaced torch.allclose"


def fabricate_class(work: Path, students: int = 34, chapters: list[str] | None = None, seed: int = 3) -> Path:
    """A realistic class: most submit every chapter, some skip or are late, a few cannot be graded,
    one patches the checks (a note on every test), names as an LMS gives them."""
    rng = random.Random(seed)
    chapters = chapters or list(COURSE)
    for k in range(students):
        sid = f"{20240000 + 17 * k}"
        name = f"{FIRST[k % len(FIRST)]} {chr(65 + (7 * k) % 26)}{'ohnson' if k % 3 else 'ee'}{'-Lopez' * (k == 5)}"
        skill = rng.uniform(0.35, 1.0)
        for ci, ch in enumerate(chapters):
            if rng.random() < 0.06:
                continue  # not submitted
            tests = chapter_tests(ch)
            passed = {g for j, g in enumerate(tests) if rng.random() < skill * (1.05 - 0.08 * j)}
            late = rng.random() < 0.08
            if (k, ci) in ((4, 1), (11, len(chapters) - 1)):
                fabricate(work, sid, ch, status="error", name=name, late=late,
                          message="the kernel could not run the notebook: it died 3 times")
            elif (k, ci) == (9, 0):
                fabricate(work, sid, ch, status="unreadable", name=name, message="not a notebook (not JSON)")
            elif (k, ci) == (7, min(2, len(chapters) - 1)):
                fabricate(work, sid, ch, set(tests), name=name, notes={g: PATCH for g in tests})
            else:
                fabricate(work, sid, ch, passed, name=name, late=late)
    return work


def _report(work: Path) -> tuple[str, str]:
    path = report.main(work)
    return path.read_text(encoding="utf-8"), (path.parent / "report.html").read_text(encoding="utf-8")


def _html_tables(page: str) -> list[str]:
    return re.findall(r"<table.*?</table>", page, re.S)


def _rows(table: str) -> list[list[str]]:
    """Each body row's cells as text (markup stripped, entities left)."""
    body = table.split("<tbody>", 1)[1]
    return [[re.sub(r"<[^>]+>", " ", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def test_the_per_student_table_comes_first_with_a_column_per_chapter_total_and_late(tmp_path):
    fabricate_class(tmp_path, students=6, chapters=["01_tensors", "02_dtypes", "03_numpy_bridge"])
    md, page = _report(tmp_path)
    assert md.index("## Students") < md.index("## Chapters") < md.index("## Hardest first") < md.index("## Needs review")
    header = next(line for line in md.splitlines() if line.startswith("| student"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "student", "id", "01_tensors", "02_dtypes", "03_numpy_bridge", "total (of 300)", "late"]
    tables = _html_tables(page)
    assert 'class="students"' in tables[0], "the first table of the page is the students'"
    rows = _rows(tables[0])
    assert len(rows) == 6 and all(len(r) == 7 for r in rows)
    assert [r[0] for r in rows] == sorted((r[0] for r in rows), key=str.casefold)
    ids = {r[1] for r in rows}
    assert ids == {f"{20240000 + 17 * k}" for k in range(6)}


def test_a_submission_not_graded_shows_its_status_never_a_zero(tmp_path):
    fabricate(tmp_path, "ann", "01_tensors")
    fabricate(tmp_path, "bob", "01_tensors", status="error", message="the kernel could not run the notebook")
    fabricate(tmp_path, "bob", "02_dtypes", set())
    fabricate(tmp_path, "cat", "02_dtypes", status="unreadable", message="not a notebook")
    md, page = _report(tmp_path)
    cells = {r[1]: r for r in _rows(_html_tables(page)[0])}
    assert cells["bob"][2] == "error" and cells["bob"][3] == "0", "a failed graded chapter is a 0, an error is not"
    assert cells["cat"][2] == "—" and cells["cat"][3] == "unreadable"
    assert cells["cat"][4] == "0", "an unreadable file is final: the total counts it as nothing, complete"
    assert cells["bob"][4].startswith("0") and "incomplete" in cells["bob"][4], "an error is graded again"
    assert cells["ann"][2] == "100" and cells["ann"][3] == "—" and cells["ann"][4] == "100"
    md_rows = {line.split("|")[2].strip(): line for line in md.splitlines() if line.startswith("| ")}
    assert "| error | 0 |" in md_rows["bob"] and "| — | unreadable |" in md_rows["cat"]
    chapters = _rows(next(t for t in _html_tables(page) if 'class="chapters"' in t))
    tensors = next(r for r in chapters if r[0] == "01_tensors")
    assert tensors[2:6] == ["2", "1", "100", "100"], "the error counts as submitted, in no mean or median"


def test_each_chapter_has_mean_median_pass_rate_and_its_few_hardest_tests(tmp_path):
    for s, passed in (("a", 7), ("b", 3), ("c", 2), ("d", 0)):
        fabricate(tmp_path, s, "01_tensors", set(list(chapter_tests("01_tensors"))[:passed]))
    md, page = _report(tmp_path)
    row = next(line for line in md.splitlines() if line.startswith("| 01_tensors |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:8] == ["100", "4", "4", "53.8", "57.5", "50% (2/4)", "0"]  # scores 100, 70, 45, 0
    hardest = md.split("### 01_tensors")[1].split("![")[0]
    listed = re.findall(r"\| (test_\w+) \|", hardest)
    assert listed == ["test_ex4_sample_rows", "test_ex3_ensemble_predict", "test_ex1_checkerboard"]  # practice ones left out
    assert "| 25% | 1/4 | 3 failed, 1 passed |" in hardest


def test_figures_are_shown_at_their_own_width_with_legible_text(tmp_path):
    fabricate_class(tmp_path, students=8)
    _, page = _report(tmp_path)
    imgs = re.findall(r'<img src="data:image/svg\+xml;base64,([^"]+)" width="(\d+)" height="(\d+)"', page)
    assert len(imgs) == len(COURSE)
    for data, width, height in imgs:
        svg = base64.b64decode(data).decode()
        assert re.search(rf'<svg [^>]*width="{width}" height="{height}" viewBox="0 0 {width} {height}"', svg)
        sizes = [int(s) for s in re.findall(r'<text [^>]*font-size="(\d+)"', svg)]
        assert sizes and min(sizes) >= 11
    assert (tmp_path / "report" / "01_tensors.svg").read_text().startswith("<svg ")
    assert report_plot.WIDTH <= 640


def test_one_review_row_per_submission_with_its_findings_inside(tmp_path):
    notes = {g: PATCH for g in chapter_tests("01_tensors")}
    notes["test_ex1_checkerboard"] = "for review: the answer imports os: `import os`; " + PATCH
    fabricate(tmp_path, "mallory", "01_tensors", notes=notes)
    fabricate(tmp_path, "mallory", "02_dtypes", notes={"test_ex2_smallest_int_dtype": PATCH})
    fabricate(tmp_path, "honest", "01_tensors")
    md, page = _report(tmp_path)
    review = md.split("## Needs review")[1]
    rows = [line for line in review.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 2, rows
    assert rows[0].count("replaced torch.allclose") == 1 and "and 4 more" in rows[0] and "imports os" in rows[0]
    table = page.split('id="needs-review"')[1]
    html_rows = re.findall(r"<tr><td>.*?</tr>", table, re.S)
    assert len(html_rows) == 2 and html_rows[0].count("<li>") == 2
    assert "honest" not in table


def test_no_review_says_so(tmp_path):
    fabricate(tmp_path, "ann", "01_tensors")
    md, page = _report(tmp_path)
    assert "Nothing: no grader's note" in md.split("## Needs review")[1]
    assert "## Not graded" not in md and 'id="not-graded"' not in page


HOSTILE = ["<script>alert(1)</script>", "`rm -rf`", "a | b", "[x](javascript:alert(1))", "<img src=x onerror=1>"]
RAW_MARKDOWN = mistune.create_markdown(escape=False, plugins=["table"])


@pytest.mark.parametrize("text", HOSTILE)
def test_a_hostile_name_or_note_opens_no_markup(tmp_path, text):
    fabricate(tmp_path, "s1", "01_tensors", name=text, late=True, notes={"test_ex1_checkerboard": f"for review: `{text}`"})
    fabricate(tmp_path, "s2", "01_tensors", name=f"x{text}", status="error", message=text)
    md, page = _report(tmp_path)
    rendered = RAW_MARKDOWN(md)
    for cell in re.findall(r"<t[dh](?:\s[^>]*)?>(.*?)</t[dh]>", rendered, re.S):
        assert not re.search(r"<[a-zA-Z/]", cell), cell
    assert md_cell(text) in md and "javascript:" not in "".join(re.findall(r'href="([^"]*)"', rendered))
    assert "<script" not in page and "onerror=" not in page.replace("onerror=1&gt;", "")
    assert html_text(text) in page
    for block in re.findall(r"(?:^\|.*\n)+", md, re.M):
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in block.splitlines()}
        assert len(widths) == 1, block


def test_one_chapter_leaves_out_the_total(tmp_path):
    fabricate(tmp_path, "ann", "01_tensors")
    md, _ = _report(tmp_path)
    assert "| student | id | 01_tensors | late |" in md

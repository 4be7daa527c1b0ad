"""A class of honest learners: perfect chapter-01 notebooks (and two of chapter 06) saved as real
editors save them, with the harmless changes learners make. Every one scores full, none is noted
for review, and every one is a row in grades.csv, under both engines.

What the editors write was measured on public notebooks (shared/FACTS.md, "Real editors'
notebooks"): Colab (2024) keeps nbformat 4.5 and the nbgrader metadata, copies each id into
``metadata.id``, adds ``colab``/``outputId`` to code cells with output and a first markdown
cell ``view-in-github`` without an id; older Colab notebooks are nbformat 4.0 with ids only in
``metadata.id``; VS Code sorts keys recursively, writes a 1-space indent and a trailing newline.
"""

from __future__ import annotations

import copy
import csv
import json

import pytest

from grader import cells, grade, project, samples
from grader.record import export

pytestmark = pytest.mark.slow

CH = "01_tensors"


def perfect(chapter: str = CH) -> dict:
    nb = samples.make_submission(chapter, dict.fromkeys(samples.answer_ids(chapter), samples.SOLUTION))
    return json.loads(json.dumps(nb))


def sort_keys(obj):
    if isinstance(obj, dict):
        return {k: sort_keys(obj[k]) for k in sorted(obj)}
    if isinstance(obj, list):
        return [sort_keys(v) for v in obj]
    return obj


def colab_2024(nb: dict) -> str:
    nb = copy.deepcopy(nb)
    nb["metadata"] = {"colab": {"provenance": [], "include_colab_link": True}, "kernelspec": {"name": "python3", "display_name": "Python 3"},
                      "language_info": {"name": "python"}}
    for k, c in enumerate(nb["cells"]):
        c["metadata"]["id"] = c["id"]
        if c["cell_type"] == "code":
            c["metadata"]["colab"] = {"base_uri": "https://localhost:8080/"}
            c["metadata"]["outputId"] = f"0a1b2c3d-{k:04d}"
            c["execution_count"] = k + 1
            c["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ran in Colab\n"]}]
    nb["cells"].insert(0, {"cell_type": "markdown", "metadata": {"id": "view-in-github", "colab_type": "text"},
                           "source": ["<a href=\"https://colab.research.google.com/github/x/y/blob/main/t.ipynb\" target=\"_parent\">"
                                      "<img src=\"https://colab.research.google.com/assets/colab-badge.svg\" alt=\"Open In Colab\"/></a>"]})
    return json.dumps(nb, indent=2)


def colab_old(nb: dict) -> str:
    """nbformat 4.0, ids only in metadata.id, and (an old Colab) the nbgrader metadata and marker lines gone."""
    nb = copy.deepcopy(nb)
    nb["nbformat_minor"] = 0
    for c in nb["cells"]:
        cid = c.pop("id")
        c["metadata"] = {"id": cid}
        if cells.marker(c) is not None and cells.marker(c)[0] == "answer":
            c["source"] = "".join(c["source"]).split("\n", 1)[1]
    return json.dumps(nb, indent=2)


def vscode(nb: dict) -> str:
    nb = copy.deepcopy(nb)
    nb["metadata"]["vscode"] = {"interpreter": {"hash": "0" * 64}}
    return json.dumps(sort_keys(nb), indent=1, ensure_ascii=False) + "\n"


def edit(nb: dict, change) -> str:
    nb = copy.deepcopy(nb)
    change(nb)
    return json.dumps(nb, indent=1)


def setup_index(nb: dict) -> int:
    return next(i for i, c in enumerate(nb["cells"]) if "cu.setup(" in "".join(c["source"]))


def comment_setup(nb):
    c = nb["cells"][setup_index(nb)]
    c["source"] = "# my notes: this installs the helpers on Colab\n" + "".join(c["source"]) + "  # seeded\n"


def crlf(nb):
    for c in nb["cells"]:
        c["source"] = "".join(c["source"]).replace("\n", "\r\n")


def drive_mount(nb):
    nb["cells"].insert(setup_index(nb) + 1, {
        "cell_type": "code", "execution_count": None, "id": "mount", "metadata": {}, "outputs": [],
        "source": "from google.colab import drive\ndrive.mount('/content/drive')\nDATA = '/content/drive/MyDrive/data.csv'"})


def pasted_graded_cell(nb):
    nb["cells"].append({
        "cell_type": "code", "execution_count": None, "id": "pasted", "outputs": [],
        "metadata": {"nbgrader": {"grade": True, "solution": False, "locked": True, "points": 5,
                                  "grade_id": "test_ex3_from_another_notebook", "schema_version": 3}},
        "source": "assert 1 + 1 == 2"})


def own_graded_cell(nb):
    nb["cells"].append({
        "cell_type": "code", "execution_count": None, "id": "mine", "outputs": [],
        "metadata": {"nbgrader": {"grade": True, "solution": True, "locked": False, "points": 2,
                                  "grade_id": "my_scratch", "schema_version": 3}},
        "source": "print(checkerboard(2, 2))"})


def lost_parameters_tag(nb):
    for c in nb["cells"]:
        c.get("metadata", {}).pop("tags", None)


def extra_cells_and_comments(nb):
    for c in nb["cells"]:
        if cells.marker(c) is not None and cells.marker(c)[0] == "answer":
            c["source"] = "".join(c["source"]) + "\n# I checked this by hand: it works\n"
    nb["cells"].insert(setup_index(nb) + 1, {"cell_type": "code", "execution_count": None, "id": "scratch",
                                             "metadata": {}, "outputs": [], "source": "x = torch.randn(3)\nprint(x)"})


def own_module(nb):
    """Helpers of the learner's own in a module written from the notebook: hypothesis would add its
    constants to the pool it draws from, and the hidden tests met other inputs than the reference's."""
    at = setup_index(nb) + 1
    nb["cells"][at:at] = [
        {"cell_type": "code", "execution_count": None, "id": "writefile", "metadata": {}, "outputs": [],
         "source": "%%writefile my_tools.py\nSIZES = [3, 7, 11, 250, 4096, 100000]\nSCALE = 0.125\n"},
        {"cell_type": "code", "execution_count": None, "id": "import-it", "metadata": {}, "outputs": [],
         "source": "import my_tools\nmy_tools.SIZES"},
    ]


def global_mode(code: str):
    """A cell right after the setup that changes one of torch's global modes for the rest of
    the notebook (the learner's visible tests build their expected values under it too)."""
    def change(nb):
        nb["cells"].insert(setup_index(nb) + 1, {"cell_type": "code", "execution_count": None, "id": "mode",
                                                 "metadata": {}, "outputs": [], "source": code})
    return change


STUDENTS = {
    "colab_2024": lambda nb: colab_2024(nb),
    "colab_old": lambda nb: colab_old(nb),
    "vscode": lambda nb: vscode(nb),
    "setup_commented": lambda nb: edit(nb, comment_setup),
    "crlf": lambda nb: edit(nb, crlf),
    "drive_mount": lambda nb: edit(nb, drive_mount),
    "pasted_graded_cell": lambda nb: edit(nb, pasted_graded_cell),
    "own_graded_cell": lambda nb: edit(nb, own_graded_cell),
    "lost_parameters_tag": lambda nb: edit(nb, lost_parameters_tag),
    "extra_cells_and_comments": lambda nb: edit(nb, extra_cells_and_comments),
    "own_module": lambda nb: edit(nb, own_module),
    "float64_default": lambda nb: edit(nb, global_mode("torch.set_default_dtype(torch.float64)")),
    "bom": lambda nb: "\ufeff" + json.dumps(nb, indent=1),
    "José Núñez": lambda nb: json.dumps(nb, indent=1),
    "Ann Lee": lambda nb: json.dumps(nb, indent=1),
}


#: Learners of chapter 06, where precision and debugging a backward invite global modes.
AUTOGRAD = "06_autograd"
AUTOGRAD_STUDENTS = {
    "float64_for_gradients": global_mode("torch.set_default_dtype(torch.float64)  # finite differences want it"),
    "anomaly_detection": global_mode("torch.autograd.set_detect_anomaly(True)"),
}


@pytest.fixture(scope="module", params=["fork", "kernel"])
def graded(tmp_path_factory, request, grade_batch):
    subs = tmp_path_factory.mktemp("honest")
    name = project.source_notebook(CH).name
    nb = perfect()
    for student, save in STUDENTS.items():
        path = subs / student / CH / name
        path.parent.mkdir(parents=True)
        path.write_text(save(nb), encoding="utf-8")
    nb = perfect(AUTOGRAD)
    for student, change in AUTOGRAD_STUDENTS.items():
        path = subs / student / AUTOGRAD / project.source_notebook(AUTOGRAD).name
        path.parent.mkdir(parents=True)
        path.write_text(edit(nb, change), encoding="utf-8")
    work = tmp_path_factory.mktemp("work")
    reports = grade_batch(subs, work, jobs=2, engine=request.param)
    export.write_grades_csv(grade.Workspace(work).default_db_url(), work / "grades.csv")
    return {(r.student, r.chapter): r for r in reports}, work


@pytest.mark.parametrize("student", sorted(STUDENTS) + sorted(AUTOGRAD_STUDENTS))
def test_an_honest_perfect_notebook_scores_full_and_is_not_noted(graded, student):
    reports, _ = graded
    chapter = AUTOGRAD if student in AUTOGRAD_STUDENTS else CH
    report = next(r for r in reports.values() if (r.name or r.student) == student and r.chapter == chapter)
    failed = [(t["grade_id"], t["status"], t["reason"]) for t in report.tests if t["status"] != "passed"]
    assert (report.status, report.score, report.max_score) == ("graded", 100, 100), failed
    notes = [(t["grade_id"], t["note"]) for t in report.tests if t.get("note")]
    assert not notes


def test_every_student_is_a_row_in_grades_csv(graded):
    _, work = graded
    with open(work / "grades.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(STUDENTS) + len(AUTOGRAD_STUDENTS)
    assert {r["student_name"] for r in rows} == set(STUDENTS) | set(AUTOGRAD_STUDENTS)
    # each submitted one chapter of the batch's two: full marks of that one, out of both
    assert all((r["total"], r["max_total"]) == ("100", "200") for r in rows), rows

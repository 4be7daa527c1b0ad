"""grader.record.scores: a batch's scores written in one transaction leave the gradebook nbgrader's ORM would."""

import pytest
from nbgrader import api
from sqlalchemy import select

from grader import project
from grader.exceptions import GradebookError
from grader.record import gradebook, scores
from grader.record.scores import Scores

CHAPTER = "01_tensors"


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    """A gradebook with chapter 01 registered, copied afresh for each test."""
    folder = tmp_path_factory.mktemp("registered")
    url = f"sqlite:///{folder / 'gradebook.db'}"
    gradebook.register_chapter(url, CHAPTER, project.source_notebook(CHAPTER))
    gradebook.close_all()
    return folder / "gradebook.db"


@pytest.fixture
def db(registered, tmp_path):
    import shutil

    for suffix in ("", "-wal", "-shm"):
        if (registered.parent / (registered.name + suffix)).exists():
            shutil.copy(registered.parent / (registered.name + suffix), tmp_path / ("gradebook.db" + suffix))
    yield f"sqlite:///{tmp_path / 'gradebook.db'}"
    gradebook.close_all()


def _test_ids(url):
    with gradebook.open_gradebook(url) as gb:
        return [c.name for c in gb.find_notebook(project.source_notebook(CHAPTER).stem, CHAPTER).grade_cells]


def _orm_save(url, student, points, name=None):
    """What nbgrader's own API does for the same scores (the way this gradebook was written before)."""
    notebook = project.source_notebook(CHAPTER).stem
    with gradebook.open_gradebook(url) as gb:
        gb.update_or_create_student(student, **({"last_name": name} if name else {}))
        gb.update_or_create_submission(CHAPTER, student)
        for grade_id, score in points.items():
            grade = gb.find_grade(grade_id, notebook, CHAPTER, student)
            grade.auto_score = score
            grade.needs_manual_grade = grade.manual_score is not None
        gb.db.commit()


def _dump(url):
    """Every row a submission owns, with ids replaced by what they stand for."""
    with gradebook.open_gradebook(url) as gb:
        rows = []
        for sub in gb.db.execute(select(api.SubmittedAssignment)).scalars():
            for nb in sub.notebooks:
                for g in nb.grades:
                    rows.append(("grade", sub.student.id, sub.student.last_name, sub.assignment.name, nb.name,
                                 g.cell.name, g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade))
                for c in nb.comments:
                    rows.append(("comment", sub.student.id, nb.name, c.cell.name, c.auto_comment, c.manual_comment))
                rows.append(("notebook", sub.student.id, nb.name, nb.flagged, nb.late_submission_penalty))
            rows.append(("submission", sub.student.id, sub.timestamp, sub.extension, sub.score, sub.max_score))
        students = [(s.id, s.first_name, s.last_name, s.email, s.lms_user_id) for s in gb.db.query(api.Student)]
        return sorted(rows, key=repr), sorted(students)


def test_a_batch_leaves_the_rows_nbgraders_own_api_leaves(db, registered, tmp_path):
    ids = _test_ids(db)
    batch = [
        Scores(CHAPTER, project.source_notebook(CHAPTER).stem, f"s{k}", {g: float((k + i) % 3) for i, g in enumerate(ids)},
               name="José Núñez" if k == 1 else None)
        for k in range(5)
    ]
    scores.save(db, batch)
    other = tmp_path / "orm"
    other.mkdir()
    import shutil

    shutil.copy(registered, other / "gradebook.db")
    orm_url = f"sqlite:///{other / 'gradebook.db'}"
    for item in batch:
        _orm_save(orm_url, item.student, item.scores, item.name)
    assert _dump(db) == _dump(orm_url)
    assert len(_dump(db)[0]) > 5 * len(ids)


def test_scores_written_again_replace_the_automatic_ones_and_keep_a_manual_grade(db):
    ids = _test_ids(db)
    notebook = project.source_notebook(CHAPTER).stem
    scores.save(db, [Scores(CHAPTER, notebook, "ana", dict.fromkeys(ids, 1.0))])
    with gradebook.open_gradebook(db) as gb:
        gb.find_grade(ids[0], notebook, CHAPTER, "ana").manual_score = 0.5
        gb.db.commit()
    scores.save(db, [Scores(CHAPTER, notebook, "ana", dict.fromkeys(ids, 0.0), name="Ana")])
    with gradebook.open_gradebook(db) as gb:
        kept = gb.find_grade(ids[0], notebook, CHAPTER, "ana")
        assert (kept.auto_score, kept.manual_score, kept.needs_manual_grade) == (0.0, 0.5, True)
        other = gb.find_grade(ids[1], notebook, CHAPTER, "ana")
        assert (other.auto_score, other.needs_manual_grade) == (0.0, False)
        assert gb.find_student("ana").last_name == "Ana"
    assert scores.totals(db, CHAPTER)["ana"][0] == 0.5


def test_totals_are_nbgraders_scores_for_the_students_asked(db):
    ids = _test_ids(db)
    notebook = project.source_notebook(CHAPTER).stem
    scores.save(db, [Scores(CHAPTER, notebook, s, dict.fromkeys(ids, p)) for s, p in (("a", 1.0), ("b", 0.0))])
    with gradebook.open_gradebook(db) as gb:  # a manual grade and extra credit count as nbgrader counts them
        gb.find_grade(ids[0], notebook, CHAPTER, "a").manual_score = 0.25
        gb.find_grade(ids[1], notebook, CHAPTER, "a").extra_credit = 2.0
        gb.db.commit()
        expected = {s: (gb.find_submission(CHAPTER, s).score, gb.find_submission(CHAPTER, s).max_score) for s in "ab"}
    assert scores.totals(db, CHAPTER) == expected
    assert scores.totals(db, CHAPTER, ["b", "nobody"]) == {"b": expected["b"]}
    assert expected["a"][0] > 0 and expected["b"][0] == 0


def test_a_batch_with_an_unknown_test_cell_writes_nothing(db):
    ids = _test_ids(db)
    notebook = project.source_notebook(CHAPTER).stem
    good = Scores(CHAPTER, notebook, "good", dict.fromkeys(ids, 1.0))
    bad = Scores(CHAPTER, notebook, "bad", {"no_such_test": 1.0})
    with pytest.raises(GradebookError, match="no_such_test"):
        scores.save(db, [good, bad])
    with pytest.raises(GradebookError, match="no test cell"):  # a notebook the chapter does not have
        scores.save(db, [good, Scores(CHAPTER, "no_such_notebook", "bad", dict.fromkeys(ids, 1.0))])
    assert scores.totals(db, CHAPTER) == {}
    with gradebook.open_gradebook(db) as gb:
        assert gb.db.query(api.Student).count() == 0


def test_new_and_known_students_in_one_batch_leave_what_the_orm_leaves(db, tmp_path):
    """New submissions get their scores with their rows, known ones by update; a student twice in
    a batch keeps the last scores, either way."""
    import shutil

    ids = _test_ids(db)
    notebook = project.source_notebook(CHAPTER).stem
    orm = tmp_path / "orm"
    orm.mkdir()
    shutil.copy(db.removeprefix("sqlite:///"), orm / "gradebook.db")
    orm_url = f"sqlite:///{orm / 'gradebook.db'}"
    first = [Scores(CHAPTER, notebook, "known", dict.fromkeys(ids, 0.0))]
    second = [Scores(CHAPTER, notebook, "known", dict.fromkeys(ids, 1.0)),
              Scores(CHAPTER, notebook, "new", dict.fromkeys(ids, 1.0)),
              Scores(CHAPTER, notebook, "new", {g: float(i % 2) for i, g in enumerate(ids)}),
              Scores(CHAPTER, notebook, "known", {g: float((i + 1) % 2) for i, g in enumerate(ids)})]
    for batch in (first, second):
        scores.save(db, batch)
        for item in batch:
            _orm_save(orm_url, item.student, item.scores, item.name)
    assert _dump(db) == _dump(orm_url)
    assert scores.totals(db, CHAPTER)["new"][0] == sum(i % 2 for i in range(len(ids)))

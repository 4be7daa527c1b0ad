"""grader.record.gradebook: nbgrader's database, as the coordinator opens and writes it."""

import subprocess
import sys
from pathlib import Path

from nbgrader import api

from grader.record import gradebook


def test_the_schema_revision_read_in_process_is_the_one_alembic_reports(tmp_path):
    """A new gradebook is stamped with the same revision nbgrader's ``alembic heads`` gives."""
    ini = tmp_path / "alembic.ini"
    ini.write_text(f"[alembic]\nscript_location = {Path(api.__file__).parent / 'alembic'}\n"
                   f"sqlalchemy.url = sqlite:///{tmp_path / 'x.db'}\n")
    alembic = Path(sys.executable).parent / "alembic"
    heads = subprocess.run([str(alembic), "-c", str(ini), "heads"], capture_output=True, text=True, check=True)
    assert gradebook.alembic_head() == heads.stdout.split()[0]
    assert api.get_alembic_version is gradebook.alembic_head


def test_the_head_is_read_from_the_scripts_and_left_to_alembic_when_they_are_unclear(tmp_path, monkeypatch):
    versions = tmp_path / "alembic" / "versions"
    versions.mkdir(parents=True)
    for rev, down in (("aaa1", "None"), ("bbb2", "'aaa1'"), ("ccc3", "('bbb2',)")):
        (versions / f"{rev}_step.py").write_text(f'"""a step"""\nrevision = "{rev}"\ndown_revision = {down}\n')
    assert gradebook._heads_named_in(versions) == {"ccc3"}
    (versions / "ddd4_branch.py").write_text("revision: str = 'ddd4'\ndown_revision: str | None = 'aaa1'\n")
    assert gradebook._heads_named_in(versions) == {"ccc3", "ddd4"}  # two heads: alembic decides
    (versions / "eee5_odd.py").write_text("REVISION = compute()\n")
    assert gradebook._heads_named_in(versions) == set()  # a script we cannot read: alembic decides

    asked = []

    class Scripts:  # alembic's answer, when it is asked
        def __init__(self, where):
            asked.append(where)

        def get_current_head(self):
            return "from-alembic"

    import alembic.script

    monkeypatch.setattr(alembic.script, "ScriptDirectory", Scripts)
    monkeypatch.setattr(gradebook, "_head", None)
    monkeypatch.setattr(gradebook, "_heads_named_in", lambda versions: {"x", "y"})
    assert gradebook.alembic_head() == "from-alembic" and asked


def test_registering_a_chapter_returns_its_release(tmp_path, mini_solutions):
    from grader import project
    from grader.prepare.release import build_release, dumps

    chapter = project.chapters(mini_solutions)[0]
    source = project.source_notebook(chapter, mini_solutions)
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    assert dumps(gradebook.register_chapter(url, chapter, source)) == dumps(build_release(chapter, source))
    gradebook.close_all()


def test_a_new_gradebook_is_stamped_with_that_revision(tmp_path):
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with gradebook.open_gradebook(url) as gb:
        from sqlalchemy import text

        stamped = gb.db.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    assert stamped == gradebook.alembic_head()
    gradebook.close_all()


def test_an_sqlite_gradebook_commits_in_write_ahead_log_mode(tmp_path):
    """Commits do not wait for the disk each time (WAL, synchronous=NORMAL): see _tune_sqlite."""
    from sqlalchemy import text

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with gradebook.open_gradebook(url) as gb:
        assert gb.db.execute(text("PRAGMA journal_mode")).scalar_one() == "wal"
        assert gb.db.execute(text("PRAGMA synchronous")).scalar_one() == 1  # NORMAL
    gradebook.close_all()


def test_recording_looks_rows_up_through_indexes_in_every_gradebook_a_process_opens(tmp_path):
    """nbgrader indexes grade.notebook_id and the like only second in a unique pair: the grader adds
    its own (a totals query scanned the whole gradebook at every flush). Three new gradebooks in one
    process: each gets them, and nbgrader's own tables are left as nbgrader declares them."""
    from sqlalchemy import inspect, text

    from grader.record import scores

    for k in range(3):
        url = f"sqlite:///{tmp_path / f'gradebook{k}.db'}"
        with gradebook.open_gradebook(url) as gb:
            found = {(t, tuple(i["column_names"])) for t, _ in gradebook.INDEXED for i in inspect(gb.engine).get_indexes(t)}
            plan = " ".join(str(row[-1]) for row in gb.db.execute(text("EXPLAIN QUERY PLAN SELECT * FROM grade WHERE notebook_id = 'x'")))
        assert {(t, (c,)) for t, c in gradebook.INDEXED} <= found
        assert "course_grade_notebook_id" in plan
        assert scores.totals(url, "nothing") == {}
    assert all(not t.indexes for t in api.Base.metadata.tables.values()), "nbgrader's table objects were changed"
    gradebook.close_all()

"""grader.gradebook: nbgrader's database, as the coordinator opens and writes it."""

import subprocess
import sys
from pathlib import Path

from nbgrader import api

from grader import gradebook


def test_the_schema_revision_read_in_process_is_the_one_alembic_reports(tmp_path):
    """A new gradebook is stamped with the same revision nbgrader's ``alembic heads`` gives."""
    ini = tmp_path / "alembic.ini"
    ini.write_text(f"[alembic]\nscript_location = {Path(api.__file__).parent / 'alembic'}\n"
                   f"sqlalchemy.url = sqlite:///{tmp_path / 'x.db'}\n")
    alembic = Path(sys.executable).parent / "alembic"
    heads = subprocess.run([str(alembic), "-c", str(ini), "heads"], capture_output=True, text=True, check=True)
    assert gradebook.alembic_head() == heads.stdout.split()[0]
    assert api.get_alembic_version is gradebook.alembic_head


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

"""Grades back into the LMS: Canvas's gradebook and Moodle's worksheet filled in, every other byte kept."""

from __future__ import annotations

import csv
import io

import pytest

from grader.exceptions import LmsFileError
from grader.record import csv_spans
from grader.record.lms_export import Grade, fill_canvas, fill_moodle

GRADES = {
    "canvas-11": Grade("graded", 80.0, 100.0, "blockj"),
    "canvas-12": Grade("unreadable", 0.0, 100.0, "roea"),
    "canvas-13": Grade("graded", 100.0, 100.0, "gonek"),  # no row in the gradebook
    "moodle-23456": Grade("graded", 75.0, 100.0, "José Núñez"),
    "moodle-34567": Grade("missing", 0.0, 100.0, "Ann Lee"),
}

CANVAS = ("\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Quiz 1 (23),01_tensors (1234),Current Score\n"
          "    Points Possible,,,,,10.00,50.00,\n"
          '"Block, Jasen",11,,jblock3430,XC 101,8.00,,80.00\n'
          '"Roe, Ann",12,,aroe,XC 101,7.00,31.00,70.00\n'
          '"Test, Student",99,,,XC 101,,,\n')


def cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text.lstrip("\ufeff"), newline="")))


def test_a_canvas_gradebook_gets_the_chapters_column_filled_and_nothing_else(tmp_path):
    src = tmp_path / "gradebook.csv"
    src.write_bytes(CANVAS.encode())
    done = fill_canvas(src, tmp_path / "out.csv", GRADES, chapter="01_tensors")
    out = (tmp_path / "out.csv").read_bytes().decode()
    before, after = cells(CANVAS), cells(out)
    col = before[0].index("01_tensors (1234)")
    changed = [(r, c) for r, row in enumerate(before) for c, v in enumerate(row) if after[r][c] != v]
    assert changed == [(2, col)], "one cell: Jasen's score, scaled to Canvas's 50 points"
    assert after[2][col] == "40"
    assert out == CANVAS.replace("XC 101,8.00,,80.00", "XC 101,8.00,40,80.00"), "every other byte kept"
    assert (done.filled, done.column) == (1, "01_tensors (1234)")
    assert done.not_graded == ["canvas-12 (Roe, Ann): unreadable"]
    assert done.not_in_file == ["canvas-13 (gonek)"] and done.not_here == ["canvas-99 (Test, Student)"]
    assert "scaled" in done.scale


def test_canvas_needs_the_column_named_when_the_chapter_is_no_columns_title(tmp_path):
    src = tmp_path / "gradebook.csv"
    src.write_text(CANVAS.replace("01_tensors (1234)", "Tensors (1234)").replace("Quiz 1 (23)", "Tensors (23)"))
    with pytest.raises(LmsFileError, match="--column"):
        fill_canvas(src, tmp_path / "out.csv", GRADES, chapter="01_tensors")
    with pytest.raises(LmsFileError, match="2 assignment column"):
        fill_canvas(src, tmp_path / "out.csv", GRADES, chapter="01_tensors", column="Tensors")
    done = fill_canvas(src, tmp_path / "out.csv", GRADES, chapter="01_tensors", column="1234")
    assert cells((tmp_path / "out.csv").read_text())[2][6] == "40" and done.filled == 1


MOODLE_EN = ('Identifier,"Full name","Email address",Status,Grade,"Maximum Grade","Grade can be changed",'
             '"Last modified (submission)","Last modified (grade)","Feedback comments"\r\n'
             'Participant 23456,"José Núñez",jose@example.org,"Submitted for grading",,100.00,Yes,'
             '"Friday, 20 November 2026, 9:00 AM",-,\r\n'
             'Participant 34567,"Ann Lee",ann@example.org,"No submission",,100.00,Yes,-,-,\r\n'
             'Participant 45678,"=HYPERLINK(""x"")",eve@example.org,"No submission",12.00,100.00,Yes,-,-,"keep, me"\r\n')
MOODLE_ES = ('Identificador,"Nombre completo","Dirección de correo",Estado,Calificación,"Calificación máxima",'
             '"La calificación puede ser cambiada","Última modificación (entrega)","Texto en línea",'
             '"Última modificación (calificación)","Comentarios de retroalimentación"\r\n'
             'Participante 23456,"José Núñez",jose@example.org,"Enviado para calificar",,"10,00",Sí,'
             '"viernes, 20 de noviembre de 2026, 09:00","<p>hola</p>",-,\r\n')


@pytest.mark.parametrize(("sheet", "want"), [(MOODLE_EN, "75.00"), (MOODLE_ES, "7,50")])
def test_a_moodle_worksheet_gets_its_grade_column_filled_in_any_language(tmp_path, sheet, want):
    src = tmp_path / "worksheet.csv"
    src.write_bytes(sheet.encode())
    done = fill_moodle(src, tmp_path / "out.csv", GRADES)
    out = (tmp_path / "out.csv").read_bytes()
    before, after = cells(sheet), cells(out.decode())
    changed = [(r, c) for r, row in enumerate(before) for c, v in enumerate(row) if after[r][c] != v]
    assert changed == [(1, 4)] and after[1][4] == want
    cell = f'"{want}"' if "," in want else want
    assert out == sheet.replace(",,", f",{cell},", 1).encode(), "CRLF, quoting and every other byte kept"
    assert done.filled == 1 and done.not_in_file == []
    if sheet is MOODLE_EN:
        assert done.not_graded == ["moodle-34567 (Ann Lee): missing"]
        assert done.not_here == ['moodle-45678 (=HYPERLINK("x"))']


def test_a_file_that_is_no_lms_export_is_one_clear_error(tmp_path):
    src = tmp_path / "x.csv"
    src.write_text("name,score\nann,3\n")
    with pytest.raises(LmsFileError, match="no ID column"):
        fill_canvas(src, tmp_path / "o.csv", GRADES, chapter="01_tensors")
    with pytest.raises(LmsFileError, match="Participant N"):
        fill_moodle(src, tmp_path / "o.csv", GRADES)
    src.write_text('a,"b\n')
    with pytest.raises(LmsFileError, match="never closed"):
        csv_spans.read(src.read_text())

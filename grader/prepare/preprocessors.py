"""The course's own nbconvert preprocessors (release and grading steps nbgrader lacks)."""

from __future__ import annotations

import copy
import functools
import json
import traceback
from typing import Any

import jsonschema
import nbformat
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from nbformat.v4 import new_markdown_cell
from nbgrader.nbgraderformat import MetadataValidator
from nbgrader.nbgraderformat import ValidationError as NbgraderValidationError
from nbgrader.nbgraderformat import common as _nbgrader_format
from nbgrader.preprocessors import CheckCellMetadata as _NbgraderCheckCellMetadata
from nbgrader.preprocessors import DeduplicateIds, OverwriteCells, OverwriteKernelspec
from traitlets import List, Unicode

from grader import cells, jsonio


class _CompiledSchemas:
    """What nbgrader's metadata validator sees as ``jsonschema``: ``validate`` with the schema
    checked and compiled once per process, instead of on every call (``jsonschema.validate``
    re-checks the schema itself each time: 3-4 ms a cell, 0.2 s a chapter-01 notebook; and
    nbgrader reads its schema file afresh for every notebook). Same errors.

    Metadata found valid is remembered (as its JSON text, per schema): every submission of a
    chapter carries the same nbgrader metadata on the same cells, so a batch validates each
    distinct one once. Invalid metadata is validated every time (its error raised afresh).
    """

    MAX_REMEMBERED = 4096  # distinct valid metadata kept; a notebook full of made-up ones only costs time

    def __init__(self) -> None:
        self._seen: tuple[Any, str] | None = None  # the last schema object and its JSON text
        self._validators: dict[str, Any] = {}  # schema's JSON text -> its compiled validator
        self._valid: set[tuple[str, str]] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(jsonschema, name)

    def validate(self, instance: Any, schema: dict) -> None:
        if self._seen is not None and self._seen[0] is schema:
            text = self._seen[1]
        else:
            text = json.dumps(schema, sort_keys=True)
            self._seen = (schema, text)
        validator = self._validators.get(text)
        if validator is None:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            validator = self._validators[text] = cls(json.loads(text))
        try:
            key = (text, json.dumps(instance, sort_keys=True, allow_nan=False))
        except (TypeError, ValueError):  # not plain JSON data: validated every time
            key = None
        if key is not None and key in self._valid:
            return
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error
        if key is not None:
            if len(self._valid) >= self.MAX_REMEMBERED:
                self._valid.clear()
            self._valid.add(key)


class CheckCellMetadata(_NbgraderCheckCellMetadata):
    """nbgrader's ``CheckCellMetadata``, with its JSON schema read and compiled once per process
    (nbgrader's step makes a new validator, which reads the schema file, for every notebook)."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        if not isinstance(_nbgrader_format.jsonschema, _CompiledSchemas):
            _nbgrader_format.jsonschema = _CompiledSchemas()
        try:
            _metadata_validator().validate_nb(nb)
        except NbgraderValidationError:  # what nbgrader's step logs and raises
            self.log.error(traceback.format_exc())
            msg = "Notebook failed to validate; the nbgrader metadata may be corrupted."
            self.log.error(msg)
            raise NbgraderValidationError(msg) from None
        return nb, resources


@functools.lru_cache(maxsize=1)
def _metadata_validator() -> MetadataValidator:
    """nbgrader's metadata validator (it keeps nothing but its schema, read from a file)."""
    return MetadataValidator()


class MarkExerciseCells(Preprocessor):
    """Write a stable marker line at the top of every answer and test cell.

    Editors that drop cell metadata (Colab, VS Code, old JupyterLab) keep the source, so
    the marker lets the grader recognise the cell again.
    """

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        gid = cells.grade_id(cell)
        if gid is None or cells.marker(cell) is not None:
            return cell, resources
        if cells.is_solution(cell):
            kind = "answer"
        elif cells.is_test(cell):
            kind = "tests"
        else:
            return cell, resources
        cell.source = cells.marker_line(kind, gid) + "\n" + cells.source_text(cell)
        return cell, resources


class StripMetadata(Preprocessor):
    """Keep only allow-listed notebook and cell metadata; drop outputs and execution counts."""

    cell_keys = List(
        ["nbgrader", "tags", "editable", "deletable"], help="Cell metadata keys to keep."
    ).tag(config=True)
    notebook_keys = List(["kernelspec", "language_info"], help="Notebook metadata keys to keep.").tag(
        config=True
    )

    def preprocess(self, nb: NotebookNode, resources: dict):
        nb.metadata = NotebookNode({k: v for k, v in nb.metadata.items() if k in self.notebook_keys})
        if "language_info" in nb.metadata:
            nb.metadata["language_info"] = NotebookNode({"name": nb.metadata["language_info"].get("name", "python")})
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        cell.metadata = NotebookNode({k: v for k, v in cell.get("metadata", {}).items() if k in self.cell_keys})
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        if "attachments" in cell and not cell.attachments:
            del cell["attachments"]
        return cell, resources


class AddColabBadge(Preprocessor):
    """Put an "Open in Colab" badge, pointing at the released notebook, on the first cell."""

    repository = Unicode(help="https://github.com/OWNER/REPO of the course").tag(config=True)
    ref = Unicode("main", help="The tag (or branch) the badge opens: [tool.course] tag.").tag(config=True)
    path = Unicode(help="Path of the released notebook inside the repository.").tag(config=True)

    BADGE_IMG = "https://colab.research.google.com/assets/colab-badge.svg"

    def badge(self) -> str:
        owner_repo = self.repository.split("github.com/", 1)[-1]
        url = f"https://colab.research.google.com/github/{owner_repo}/blob/{self.ref}/{self.path}"
        return f"[![Open In Colab]({self.BADGE_IMG})]({url})"

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]):
        badge = self.badge()
        first = nb.cells[0] if nb.cells else None
        if first is not None and first.cell_type == "markdown":
            text = cells.source_text(first)
            if text.startswith("[![Open In Colab]"):
                text = text.split("\n", 1)[1] if "\n" in text else ""
            first.source = badge + "\n\n" + text.lstrip("\n")
        else:
            cell = new_markdown_cell(badge)
            cell.id = "colab-badge"  # fixed, so that the release is reproducible
            nb.cells.insert(0, cell)
        return nb, resources


def _known_id(cell: NotebookNode, release_ids: dict[str, str]) -> str | None:
    """The grade_id of the released cell whose id this cell kept (Colab keeps it in ``metadata.id``)."""
    for cid in (cell.get("id"), cell.get("metadata", {}).get("id")):
        if isinstance(cid, str) and cid in release_ids:
            return release_ids[cid]
    return None


class RecognizeCells(Preprocessor):
    """Give answer and test cells back the nbgrader metadata an editor dropped or altered.

    A cell is recognised by the marker line the release wrote on top of it (see
    :class:`MarkExerciseCells`); its metadata is restored from the released notebook,
    found in ``resources["course"]["release_meta"]`` (grade_id -> nbgrader metadata).
    """

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        course = resources.get("course", {})
        release_meta = course.get("release_meta", {})
        found = cells.marker(cell)
        if found is not None:
            gid = found[1]
        elif not cells.nbgrader_meta(cell) and _known_id(cell, course.get("release_ids", {})):
            gid = _known_id(cell, course["release_ids"])  # marker line deleted, cell id kept
        else:
            return cell, resources
        wanted = release_meta.get(gid)
        if wanted is None:
            return cell, resources
        current = cells.nbgrader_meta(cell)
        keys = ("grade", "solution", "locked", "points")
        if current.get("grade_id") != gid or any(current.get(k) != wanted.get(k) for k in keys):
            self.log.info("restored nbgrader metadata of cell %s", gid)
            cells.set_nbgrader_meta(cell, wanted)
            if cell.cell_type != "code":
                cell.cell_type = "code"
                cell.outputs = []
                cell.execution_count = None
                cell.pop("attachments", None)
        return cell, resources


class ForgetUnknownCells(Preprocessor):
    """Make a graded or answer cell the chapter does not have (pasted from another notebook, or
    added by the learner) a plain cell: it runs as the learner's code and is never scored.

    The grade_ids it dropped are listed in ``resources["course"]["forgotten"]``.
    """

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        course = resources.setdefault("course", {})
        gid = cells.grade_id(cell)
        if cells.nbgrader_meta(cell) and gid not in course.get("release_meta", {}):
            self.log.info("cell %s is not a cell of this chapter: kept as a plain cell", gid)
            course.setdefault("forgotten", []).append(str(gid))
            del cell.metadata["nbgrader"]
        return cell, resources


class OrderTestCells(Preprocessor):
    """Put a test cell the learner moved above its answer cell back below it.

    ``resources["course"]["pairs"]`` maps each test's grade_id to its answer's grade_id.
    """

    def preprocess(self, nb: NotebookNode, resources: dict):
        pairs = resources.get("course", {}).get("pairs", {})
        ids = [cells.grade_id(c) for c in nb.cells]
        for test_id, answer_id in pairs.items():
            if test_id not in ids or answer_id not in ids:
                continue
            t = ids.index(test_id)
            a = len(ids) - 1 - ids[::-1].index(answer_id)  # the last copy of the answer
            if t < a:
                self.log.info("moved test cell %s below its answer cell", test_id)
                nb.cells.insert(a, nb.cells.pop(t))  # a shifted down by one: this lands right after it
                ids.insert(a, ids.pop(t))
        return nb, resources


class DeduplicateCells(DeduplicateIds):
    """nbgrader's DeduplicateIds (the last copy of a duplicated cell keeps its role), but an
    earlier copy loses its ``nbgrader`` key entirely: nbgrader's own OverwriteCells fails on
    the empty dict that DeduplicateIds leaves behind."""

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        cell, resources = super().preprocess_cell(cell, resources, index)
        if cell.get("metadata", {}).get("nbgrader", None) == {}:
            del cell.metadata["nbgrader"]
        return cell, resources


#: RestoreCells' outcome per distinct cell: (the chapter's cells, its type, source and nbgrader metadata)
#: -> (those cells, the source after, the metadata after, the changes nbgrader reported)
_RESTORED: dict[tuple, tuple] = {}
MAX_RESTORED = 4096  # distinct cells remembered; past it, forgotten and worked out again


class RestoreCells(OverwriteCells):
    """nbgrader's ``OverwriteCells``, answered from the chapter's cells read once per batch.

    Given ``resources["course"]["gradebook"]`` (a :class:`grader.record.gradebook.ChapterCells`), it
    restores test cells, points, checksums and missing cells exactly as nbgrader does, without
    opening the gradebook; without it, it is nbgrader's step unchanged.
    """

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        snapshot = resources.get("course", {}).get("gradebook")
        if snapshot is None:
            return super().preprocess(nb, resources)
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        self.db_url = resources["nbgrader"]["db_url"]
        self.gradebook = snapshot
        nb, resources = super(OverwriteCells, self).preprocess(nb, resources)  # cell by cell, as nbgrader
        if self.add_missing_cells:
            nb, resources = self.add_missing_grade_cells(nb, resources)
            nb, resources = self.add_missing_task_cells(nb, resources)
        return nb, resources

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int) -> tuple[NotebookNode, dict]:
        """nbgrader's step for one cell, worked out once per distinct cell and chapter: every
        submission carries the release's test cells, whose checksums nbgrader computes twice each
        and whose hidden part it restores. A cell met again (the same type, source and metadata)
        gets the same source and metadata, and the same warnings are logged; a cell whose type or
        grade_id nbgrader changes is left to it each time."""
        gid, snapshot = cells.grade_id(cell), resources.get("course", {}).get("gradebook")
        if gid is None and snapshot is not None:  # nbgrader's step leaves such a cell as it is
            return cell, resources
        key = None
        if gid is not None and snapshot is not None and isinstance(cell.source, str):
            try:
                key = (id(snapshot), cell.cell_type, cell.source, jsonio.dumps(cells.nbgrader_meta(cell)))
            except TypeError:  # metadata that is not plain JSON: nbgrader's step alone
                key = None
        done = _RESTORED.get(key) if key is not None else None
        if done is not None and done[0] is snapshot:
            _, source, meta, reports = done
            cell.source = source
            cells.set_nbgrader_meta(cell, copy.deepcopy(meta))
            for report in reports:
                super().report_change(*report)
            return cell, resources
        self._reports: list[tuple] = []
        cell, resources = super().preprocess_cell(cell, resources, index)
        if key is not None and cells.grade_id(cell) == gid and cell.cell_type == key[1]:
            if len(_RESTORED) >= MAX_RESTORED:
                _RESTORED.clear()
            _RESTORED[key] = (snapshot, cell.source, copy.deepcopy(cells.nbgrader_meta(cell)), self._reports)
        return cell, resources

    def report_change(self, name: str, attr: str, old: Any, new: Any) -> None:
        """nbgrader's warning, kept to be logged again for the same cell met again."""
        self._reports.append((name, attr, old, new))
        super().report_change(name, attr, old, new)

    def missing_cell_transform(self, *args: Any, **kwargs: Any) -> NotebookNode:
        """nbgrader's restored cell, a :class:`NotebookNode` all through (nbgrader's has plain dicts inside)."""
        return nbformat.from_dict(super().missing_cell_transform(*args, **kwargs))


class RestoreKernelspec(OverwriteKernelspec):
    """nbgrader's ``OverwriteKernelspec``, answered from the chapter's cells read once per batch."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        snapshot = resources.get("course", {}).get("gradebook")
        if snapshot is None:
            return super().preprocess(nb, resources)
        kernelspec = snapshot.find_notebook(resources["nbgrader"]["notebook"], resources["nbgrader"]["assignment"]).kernelspec
        if kernelspec:
            nb.metadata["kernelspec"] = json.loads(kernelspec)
        return nb, resources

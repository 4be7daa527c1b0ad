"""ci/manifest.toml, read and checked: per-notebook timeout, GPU need, and skips with reasons."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grader.exceptions import CourseError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

MANIFEST = Path(__file__).resolve().with_name("manifest.toml")
RUNNERS = ("cpu", "cuda", "mps")  # what a skip's `on` names: the device type a run uses
GPU_RUNNERS = ("cuda", "mps")
MODES = ("solution", "release")
DEFAULT_NOTEBOOK_TIMEOUT = 600
_CHAPTER_KEYS = {"timeout", "needs_gpu", "skip"}
_SKIP_KEYS = {"on", "reason", "mode", "cell"}


class ManifestError(CourseError):
    """ci/manifest.toml is malformed: an unknown key, a bad value or a skip without a reason."""


@dataclass(frozen=True)
class Skip:
    """Skip a whole notebook, or one cell (``cell`` = its id), on some runners."""

    on: tuple[str, ...]
    reason: str
    modes: tuple[str, ...] = MODES
    cell: str | None = None

    def applies(self, runner: str, mode: str) -> bool:
        return runner in self.on and mode in self.modes


@dataclass(frozen=True)
class NotebookSettings:
    """What the manifest says about one chapter (defaults filled in)."""

    chapter: str
    timeout: int = DEFAULT_NOTEBOOK_TIMEOUT
    needs_gpu: bool = False
    skips: tuple[Skip, ...] = ()

    def skip_reason(self, runner: str, mode: str) -> str | None:
        """Why the whole notebook is not executed on this runner in this mode (None: it runs)."""
        if self.needs_gpu and runner not in GPU_RUNNERS:
            return f"needs a GPU (needs_gpu = true in ci/manifest.toml); this run's device is {runner}"
        for skip in self.skips:
            if skip.cell is None and skip.applies(runner, mode):
                return skip.reason
        return None

    def skipped_cells(self, runner: str, mode: str) -> dict[str, str]:
        """Cell id -> reason, for the cells not executed on this runner in this mode."""
        return {s.cell: s.reason for s in self.skips if s.cell is not None and s.applies(runner, mode)}


@dataclass(frozen=True)
class Manifest:
    """Every chapter's settings; a chapter the file does not name gets ``defaults``."""

    defaults: NotebookSettings = NotebookSettings(chapter="*")
    chapters: dict[str, NotebookSettings] = field(default_factory=dict)
    path: str = "ci/manifest.toml"

    def settings(self, chapter: str) -> NotebookSettings:
        if chapter in self.chapters:
            return self.chapters[chapter]
        d = self.defaults
        return NotebookSettings(chapter=chapter, timeout=d.timeout, needs_gpu=d.needs_gpu)


def _strings(value, where: str, key: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
        raise ManifestError(f"`{key}` must be a non-empty list of strings", where=where,
                            hint=f"e.g. {key} = [{', '.join(repr(a) for a in allowed[:1])}]")
    unknown = sorted(set(items) - set(allowed))
    if unknown:
        raise ManifestError(f"`{key}` names {unknown}", where=where, hint=f"choose from {list(allowed)}")
    return tuple(items)


def _skip(raw: object, where: str) -> Skip:
    if not isinstance(raw, dict):
        raise ManifestError("a skip must be a table", where=where, hint='[[chapters.NN.skip]] with on = [...] and reason = "..."')
    unknown = sorted(set(raw) - _SKIP_KEYS)
    if unknown:
        raise ManifestError(f"unknown key(s) {unknown}", where=where, hint=f"a skip has {sorted(_SKIP_KEYS)}")
    reason = raw.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise ManifestError("a skip without a reason", where=where,
                            hint='say why it is skipped there: reason = "..."')
    if "on" not in raw:
        raise ManifestError("a skip must say on which runners", where=where, hint=f"on = [...] from {list(RUNNERS)}")
    cell = raw.get("cell")
    if cell is not None and (not isinstance(cell, str) or not cell):
        raise ManifestError("`cell` must be a cell id (a string)", where=where)
    return Skip(
        on=_strings(raw["on"], where, "on", RUNNERS),
        reason=reason.strip(),
        modes=_strings(raw.get("mode", list(MODES)), where, "mode", MODES),
        cell=cell,
    )


def _settings(chapter: str, raw: object, where: str, defaults: NotebookSettings) -> NotebookSettings:
    if not isinstance(raw, dict):
        raise ManifestError("must be a table", where=where)
    unknown = sorted(set(raw) - _CHAPTER_KEYS)
    if unknown:
        raise ManifestError(f"unknown key(s) {unknown}", where=where, hint=f"a chapter has {sorted(_CHAPTER_KEYS)}")
    timeout = raw.get("timeout", defaults.timeout)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
        raise ManifestError(f"timeout = {timeout!r} is not a positive number of seconds", where=where)
    needs_gpu = raw.get("needs_gpu", defaults.needs_gpu)
    if not isinstance(needs_gpu, bool):
        raise ManifestError(f"needs_gpu = {needs_gpu!r} is not true or false", where=where)
    skips = raw.get("skip", [])
    if not isinstance(skips, list):
        raise ManifestError("`skip` must be an array of tables", where=where, hint="write [[chapters.NN.skip]]")
    return NotebookSettings(
        chapter=chapter, timeout=timeout, needs_gpu=needs_gpu,
        skips=tuple(_skip(s, f"{where}.skip[{i}]") for i, s in enumerate(skips)),
    )


def parse(data: dict, path: str = "ci/manifest.toml") -> Manifest:
    """Check a decoded manifest and turn it into :class:`Manifest`.

    Raises:
        ManifestError: naming the table and key at fault, with a hint.
    """
    unknown = sorted(set(data) - {"defaults", "chapters"})
    if unknown:
        raise ManifestError(f"unknown table(s) {unknown}", where=path, hint="the file has [defaults] and [chapters.NN_name]")
    raw_defaults = data.get("defaults", {})
    if isinstance(raw_defaults, dict) and "skip" in raw_defaults:
        raise ManifestError("skips belong to a chapter, not to [defaults]", where=f"{path}: defaults")
    defaults = _settings("*", raw_defaults, f"{path}: defaults", NotebookSettings(chapter="*"))
    chapters = {
        name: _settings(name, raw, f"{path}: chapters.{name}", defaults)
        for name, raw in data.get("chapters", {}).items()
    }
    return Manifest(defaults=defaults, chapters=chapters, path=path)


def load(path: Path = MANIFEST) -> Manifest:
    """Read and check a manifest file; a missing file means every chapter gets the defaults."""
    if not path.exists():
        return Manifest(path=str(path))
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"not valid TOML: {exc}", where=str(path)) from exc
    return parse(data, str(path))


def runner_of(device: str) -> str:
    """The runner kind a skip's ``on`` matches: the device type (``cuda:1`` -> ``cuda``).

    ``auto`` is resolved the way the notebooks resolve it (CUDA, then MPS, then the CPU).
    """
    if device == "auto":
        from course_utils import pick_device

        return pick_device("auto").type
    return device.split(":", 1)[0]

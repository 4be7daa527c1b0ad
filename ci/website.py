"""`make site`: the course as a static website, built offline from the executed release (Sphinx + myst-nb).

Each chapter's release (notebooks/) runs once with papermill, its exercise cells allowed to raise, and
is kept in a cache keyed by what the run depends on (the notebook, course_utils, FAST, the device, torch),
so a rebuild executes only what changed. Each page is the executed release with the exercises' statements
and stubs, the outputs of every demo and picture, and an "Open in Colab" link; the outputs of answer,
test and hand-in cells (the stub's error) are left out. Sphinx writes the pages and the search index.
After the build every page is read back: a line only a solution or a hidden test has is a leak, and the
build fails.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import html
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402
from nbformat import NotebookNode  # noqa: E402

from grader import cells, project  # noqa: E402
from grader.prepare import publish  # noqa: E402
from grader.prepare.release import REGIONS, _secret_lines, read, release_path  # noqa: E402

OUT = ROOT / "build" / "site"
RAISES = "raises-exception"
TITLE = "PyTorch Foundations"
CONF = '''\
project = {title!r}
extensions = ["myst_nb"]
nb_execution_mode = "off"  # executed before, by ci/website.py
nb_merge_streams = True
myst_enable_extensions = ["dollarmath"]
html_theme = "alabaster"
html_title = {title!r}
html_copy_source = False  # no copy of the notebooks beside the pages
html_show_sourcelink = False
html_theme_options = {{"description": "tensors, autograd, devices, a training loop", "fixed_sidebar": True,
                       "page_width": "1240px", "sidebar_width": "230px"}}
html_show_copyright = False
exclude_patterns = ["_build"]
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type"]
'''


def fingerprint(release: Path, fast: bool, device: str) -> str:
    """What an execution depends on: the notebook, course_utils, FAST, the device and torch's version."""
    import torch

    digest = hashlib.sha256(release.read_bytes())
    for path in sorted((ROOT / "course_utils").glob("*.py")):
        digest.update(path.read_bytes())
    digest.update(f"{fast}|{device}|{torch.__version__}".encode())
    return digest.hexdigest()[:16]


def execute(chapter: str, release: Path, fast: bool, device: str, cache: Path) -> Path:
    """The executed release of a chapter (from the cache when nothing it depends on changed)."""
    import papermill

    done = cache / f"{chapter}-{fingerprint(release, fast, device)}.ipynb"
    if done.is_file():
        return done
    nb = read(release)
    for cell in nb.cells:
        if cells.is_solution(cell) or cells.is_test(cell):
            cells.add_tag(cell, RAISES)  # the stubs raise; the page shows the statement, not the error
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"site-{chapter}-") as cwd:
        try:
            papermill.execute_notebook(nb, str(Path(cwd) / "executed.ipynb"), cwd=cwd, kernel_name="python3",
                                       parameters={"DEVICE": device, "SEED": 0, "FAST": fast},
                                       progress_bar=False, log_output=False)
        except papermill.PapermillExecutionError:  # an exercise's stub raised (its tag let the run go on)
            pass
        executed = read(Path(cwd) / "executed.ipynb")
        raised = [i for i, c in enumerate(executed.cells) if c.cell_type == "code" and not cells.has_tag(c, RAISES)
                  and any(o.get("output_type") == "error" for o in c.get("outputs", []))]
        if raised:
            raise SystemExit(f"{release}: cell {raised[0]} raised, and it is no exercise: fix the chapter")
        shutil.copyfile(Path(cwd) / "executed.ipynb", done)
    return done


def page(nb: NotebookNode, release_rel: str, pub: publish.Publication) -> NotebookNode:
    """An executed release as a page: a plain "Open in Colab" link for the badge (no remote picture), no
    injected parameters, and no output under answer, test and hand-in cells."""
    papermills = ("injected-parameters", "papermill-error-cell-tag")  # its parameters, its "An Exception..." banner
    nb.cells = [c for c in nb.cells if not any(cells.has_tag(c, tag) for tag in papermills)]
    first = nb.cells[0]
    text = cells.source_text(first)
    if text.startswith("[![Open In Colab]"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
    first.source = f"[Open in Colab]({pub.colab_url(release_rel)}) · this chapter as a notebook, run it there\n\n" \
                   + text.lstrip("\n")
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = cell.get("metadata", {}).get("tags", [])
        if RAISES in tags:
            tags.remove(RAISES)
        if cells.is_solution(cell) or cells.is_test(cell) or "cu.submit(" in cells.source_text(cell):
            cell.outputs = []
    return nb


def leaks(html_dir: Path, sources: dict[str, Path], releases: dict[str, Path] | None = None) -> list[str]:
    """Lines only a solution or hidden test has, found in any page or file of the built site.

    A chapter's page (``NN_name.html``) is read for its own chapter's secret lines (as check-release
    reads its release); every other file for the lines secret in some chapter and public in none.
    """
    secret = {chapter: _secret_lines(read(source)) for chapter, source in sources.items()}
    public: set[str] = set()
    for path in (releases or {}).values():
        public |= {line.strip() for cell in read(path).cells for line in cells.source_text(cell).splitlines()}
    anywhere = set().union(*secret.values()) - public
    marks = [m for region in REGIONS for m in region]
    found = []
    for path in sorted(html_dir.rglob("*")):
        if not path.is_file() or path.suffix not in (".html", ".js", ".txt", ".ipynb", ".json"):
            continue
        text = html.unescape(re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8", errors="replace")))
        lines = {line.strip() for line in text.splitlines()}
        rel = path.relative_to(html_dir)
        wanted = secret.get(path.stem, set()) | anywhere
        found += [f"{rel}: shows {m!r}" for m in marks if m in text]
        found += [f"{rel}: shows a line of a solution or hidden test: {line!r}" for line in sorted(wanted & lines)[:5]]
    return found


def build(chapters: list[str] | None = None, *, fast: bool = False, device: str = "cpu", jobs: int = 2,
          out: Path = OUT, solutions_dir: Path = project.SOLUTIONS, notebooks_dir: Path = project.NOTEBOOKS,
          cache: Path | None = None) -> Path:
    """Build the site into ``out/html``; returns that folder. Fails on a leak (``SystemExit``)."""
    chosen = project.resolve_chapters(chapters, solutions_dir)
    sources = {c: project.source_notebook(c, solutions_dir) for c in chosen}
    releases = {c: release_path(c, s, notebooks_dir) for c, s in sources.items()}
    cache = cache or out / "executed"
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        runs = {c: pool.submit(execute, c, releases[c], fast, device, cache) for c in chosen}
        executed = {c: run.result() for c, run in runs.items()}
    src = out / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    pub = publish.current()
    for chapter in chosen:
        rel = f"notebooks/{chapter}/{releases[chapter].name}"
        nbformat.write(page(read(executed[chapter]), rel, pub), str(src / f"{chapter}.ipynb"))
    (src / "conf.py").write_text(CONF.format(title=TITLE), encoding="utf-8")
    toc = "\n".join(chosen)
    (src / "index.md").write_text(
        f"# {TITLE}\n\nA course on the three things everything in PyTorch rests on: tensors, autograd and"
        f" devices, ending in a real training loop. Each chapter is a notebook: read it here, with its"
        f" outputs, or open it in Colab from the link on top to run it and solve its exercises.\n\n"
        f"```{{toctree}}\n:maxdepth: 1\n:caption: Chapters\n\n{toc}\n```\n", encoding="utf-8")
    html_dir = out / "html"
    shutil.rmtree(html_dir, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-j", "1", str(src), str(html_dir)],
                   check=True)
    found = leaks(html_dir, sources, releases)
    if found:
        raise SystemExit("the site leaks:\n  " + "\n  ".join(found))
    return html_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="chapters (01 or 01_tensors); all by default")
    parser.add_argument("--fast", action="store_true", help="execute with FAST=True (smaller sizes)")
    parser.add_argument("--device", default="cpu", help="value of the DEVICE parameter (default: cpu)")
    parser.add_argument("--jobs", type=int, default=2, help="chapters executed at once")
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the site goes (default: {OUT})")
    args = parser.parse_args(argv)
    html_dir = build(args.chapters or None, fast=args.fast, device=args.device, jobs=args.jobs, out=args.out)
    print(f"site built, no solution or hidden test in it: {html_dir / 'index.html'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

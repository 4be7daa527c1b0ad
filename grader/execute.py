"""Executing one submission in a fresh Jupyter kernel (the reference ``kernel`` engine)."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from nbformat import NotebookNode

log = logging.getLogger(__name__)

TIMEOUT_ENAME = "CellTimeoutError"

#: Variables a kernel inherits; everything else (tokens, keys, cloud credentials) is dropped.
ENV_KEEP = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT", "TMPDIR")


@dataclass
class ExecOptions:
    """How to execute a submission."""

    cell_timeout: int = 60
    device: str = "cpu"
    startup_timeout: int = 60
    extra_env: dict[str, str] = field(default_factory=dict)


@dataclass
class Execution:
    """What happened: the executed notebook and cell indices that did not finish normally."""

    nb: NotebookNode
    timed_out: list[int] = field(default_factory=list)
    died_at: int | None = None
    error: str | None = None  # the kernel could not run at all


def kernel_env(options: ExecOptions, home: str) -> dict[str, str]:
    """The environment of a grading kernel: stripped of secrets, seeded, CPU unless asked."""
    env = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env.update(
        HOME=home,
        PYTHONHASHSEED="0",
        COURSE_GRADING="1",
        MPLBACKEND="Agg",
        PYTHONWARNINGS="ignore",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        TQDM_DISABLE="1",
        JUPYTER_PLATFORM_DIRS="1",
        PYDEVD_DISABLE_FILE_VALIDATION="1",
    )
    if options.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(options.extra_env)
    return env


def execute(nb: NotebookNode, options: ExecOptions) -> Execution:
    """Run every code cell of ``nb`` in a new kernel, in a new empty working directory.

    Errors do not stop the run; a cell past ``options.cell_timeout`` is interrupted and
    recorded as timed out; a kernel that dies stops the run, and the cell where it died is
    recorded (later cells stay unexecuted, so they can never be mistaken for passes).
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    result = Execution(nb=nb)
    with tempfile.TemporaryDirectory(prefix="course-grade-") as work:
        home = os.path.join(work, "home")
        os.makedirs(home)
        client = NotebookClient(
            nb,
            timeout=options.cell_timeout,
            startup_timeout=options.startup_timeout,
            kernel_name="python3",
            allow_errors=True,
            interrupt_on_timeout=True,
            error_on_timeout={
                "ename": TIMEOUT_ENAME,
                "evalue": f"the cell ran longer than {options.cell_timeout} s and was stopped",
                "traceback": [],
            },
            record_timing=False,
            resources={"metadata": {"path": work}},
        )
        try:
            with client.setup_kernel(env=kernel_env(options, home), cwd=work):
                for index, cell in enumerate(nb.cells):
                    if cell.cell_type != "code":
                        continue
                    try:
                        client.execute_cell(cell, index)
                    except DeadKernelError:
                        result.died_at = index
                        break
                    if any(
                        o.get("output_type") == "error" and o.get("ename") == TIMEOUT_ENAME
                        for o in cell.get("outputs", [])
                    ):
                        result.timed_out.append(index)
        except DeadKernelError:
            result.died_at = result.died_at if result.died_at is not None else -1
        except Exception as exc:  # the kernel did not start: nothing ran
            log.warning("kernel failed: %s", exc)
            result.error = f"{type(exc).__name__}: {exc}"
    return result

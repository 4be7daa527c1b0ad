"""Inside a fork-engine child: an IPython shell whose outputs are captured as a kernel sends them.

A cell's outputs come back as nbformat outputs (``stream``, ``execute_result``,
``display_data``, ``error`` with ``ename``/``evalue``/``traceback``), built from the same
IPython hooks ipykernel uses: the display hook, the display publisher, ``_showtraceback``
and ``sys.stdout``/``sys.stderr``; output written straight to file descriptors 1 and 2 is
captured too. ``input()`` raises ``StdinNotImplementedError`` as in a kernel without stdin,
and a cell past its time is interrupted with SIGINT by the coordinator, as a kernel is.
"""

from __future__ import annotations

import builtins
import getpass
import io
import os
import signal
import socket
import sys

from IPython.core.displayhook import DisplayHook
from IPython.core.displaypub import DisplayPublisher
from IPython.core.error import StdinNotImplementedError
from IPython.core.interactiveshell import InteractiveShell

from grader.engines.fork.ledger import CELL, GUARD, Writer
from grader.engines.fork.quickshell import QuickCompiler, QuickTransformerManager, may_be_async
from grader.engines.fork.wire import MAX_STREAM, recv, send
from grader.engines.isolation.confine import set_limits

GUARD_TIMEOUT = 15  # as the kernel engine's guard probe (PROBE_TIMEOUT + 10)
TRUNCATED = "\n[the grader kept only the first {n} characters of this output]\n"


class CaptureDisplayHook(DisplayHook):
    """The value of a cell's last expression becomes an ``execute_result``."""

    def write_output_prompt(self) -> None:
        pass

    def write_format_data(self, format_dict, md_dict=None) -> None:
        self.shell.capture.add({
            "output_type": "execute_result", "execution_count": self.prompt_count,
            "data": format_dict, "metadata": md_dict or {},
        })

    def finish_displayhook(self) -> None:
        self._is_active = False


class CaptureDisplayPublisher(DisplayPublisher):
    """``display(...)`` becomes a ``display_data`` output; ``clear_output`` clears the cell's."""

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs) -> None:
        self.shell.capture.display(data, metadata or {}, transient or {}, update)

    def clear_output(self, wait=False) -> None:
        self.shell.capture.clear(wait)


class CaptureShell(InteractiveShell):
    """An InteractiveShell that hands every output to ``capture`` (a :class:`Session`)."""

    displayhook_class = CaptureDisplayHook
    display_pub_class = CaptureDisplayPublisher
    capture = None

    def _showtraceback(self, etype, evalue, stb) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        self.capture.add({"output_type": "error", "ename": str(etype.__name__), "evalue": str(evalue), "traceback": stb})

    def should_run_async(self, raw_cell, *, transformed_cell=None, preprocessing_exc_tuple=None) -> bool:
        if transformed_cell is not None and not may_be_async(transformed_cell):
            return False  # what IPython would find by compiling the cell once more
        return super().should_run_async(raw_cell, transformed_cell=transformed_cell,
                                        preprocessing_exc_tuple=preprocessing_exc_tuple)


def new_shell() -> CaptureShell:
    """The shell, built in the server (no history database, no threads) and used by children."""
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    # names cells as a kernel does (``2707655447.py``); see grader.engines.fork.quickshell
    shell = CaptureShell.instance(config=config, compiler_class=QuickCompiler)
    shell.input_transformer_manager = QuickTransformerManager(shell.compile)  # hands it each cell's parse
    return shell


class Stream(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr`` of a child."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, name: str, fd: int, session: Session):
        self.name, self._fd, self._session = name, fd, session

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._session.stream(self.name, text)
        return len(text)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._fd


def _no_input(prompt: str = "") -> str:
    raise StdinNotImplementedError("raw_input was called, but this frontend does not support input requests.")


def _no_getpass(prompt: str = "Password: ", stream=None) -> str:
    raise StdinNotImplementedError("getpass was called, but this frontend does not support input requests.")


class Session:
    """One child's conversation with the coordinator: run cells, send back their outputs."""

    def __init__(self, conn: socket.socket, shell: CaptureShell, init: dict):
        self.conn, self.shell = conn, shell
        self.guard = str(init.get("guard", ""))
        self.outputs: list[dict] = []
        self.displays: dict[str, list[dict]] = {}
        self.clear_pending = False
        self.running: str | bool = False
        self.sizes: dict[str, int] = {}
        self.ledger = Writer()  # made before any learner code runs (see grader.engines.fork.ledger)
        set_limits(init.get("memory_mb"), data_only=bool(init.get("data_only")))
        shell.capture = self
        for fd, name in ((1, "stdout"), (2, "stderr")):  # what C code and subprocesses print
            mem = os.memfd_create(f"course-{name}")
            os.dup2(mem, fd)
            os.close(mem)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdout, sys.stderr = Stream("stdout", 1, self), Stream("stderr", 2, self)
        builtins.input = _no_input
        getpass.getpass = _no_getpass
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, self._on_interrupt)  # the coordinator interrupts a cell past its time
        signal.signal(signal.SIGALRM, self._on_alarm)
        self.run_cell(str(init.get("install", "")))  # the grader's guard, as a kernel's first cell

    # outputs ------------------------------------------------------------------------------
    def add(self, output: dict) -> None:
        if self.clear_pending:
            self.outputs.clear()
            self.clear_pending = False
        self.outputs.append(output)

    def stream(self, name: str, text: str) -> None:
        used = self.sizes.get(name, 0)
        if used >= MAX_STREAM:
            return
        if used + len(text) >= MAX_STREAM:
            text = text[: MAX_STREAM - used] + TRUNCATED.format(n=MAX_STREAM)
        self.sizes[name] = used + len(text)
        last = self.outputs[-1] if self.outputs and not self.clear_pending else None
        if last is not None and last["output_type"] == "stream" and last["name"] == name:
            last["text"] += text
        else:
            self.add({"output_type": "stream", "name": name, "text": text})

    def display(self, data: dict, metadata: dict, transient: dict, update: bool) -> None:
        display_id = transient.get("display_id")
        if update:
            for output in self.displays.get(display_id, []):
                output["data"], output["metadata"] = data, metadata
            return
        output = {"output_type": "display_data", "data": data, "metadata": metadata}
        if display_id:
            self.displays.setdefault(display_id, []).append(output)
        self.add(output)

    def clear(self, wait: bool) -> None:
        if wait:
            self.clear_pending = True
        else:
            self.outputs.clear()

    def _collect_fds(self) -> None:
        for stream in (sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        for fd, name in ((1, "stdout"), (2, "stderr")):
            end = os.lseek(fd, 0, os.SEEK_CUR)
            if end:
                data = os.pread(fd, min(end, MAX_STREAM), 0)
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
                self.stream(name, data.decode("utf-8", errors="replace"))

    # running ------------------------------------------------------------------------------
    def _on_interrupt(self, signum, frame) -> None:
        """SIGINT, as a kernel gets it on an interrupt: ``KeyboardInterrupt`` in the running cell."""
        if self.running != "cell" or not self.ledger.stop_asked():
            return
        try:  # what the cell printed so far, in case it never comes back from the interrupt
            self.ledger.record({"partial": self.outputs})
        except Exception:
            pass
        raise KeyboardInterrupt

    def _on_alarm(self, signum, frame) -> None:
        if self.running == "guard":
            raise KeyboardInterrupt

    def run_cell(self, code: str, history: bool = True, plain_tracebacks: bool = False) -> dict:
        """Run ``code``; ``plain_tracebacks``: an error's traceback in IPython's ``Plain`` mode
        (frames, lines and message, ~0.5 ms) rather than its ``Context`` mode (source context with
        syntax colouring, ~10 ms an error). Test cells run so: no page shows their tracebacks (the
        feedback shows a verdict instead), and a failed test costs no more than a passed one."""
        self.outputs, self.displays, self.sizes = [], {}, {}
        self.clear_pending = False
        count = self.shell.execution_count if history else None
        tb, mode = self.shell.InteractiveTB, None
        if plain_tracebacks:
            try:
                mode = tb.mode
                tb.set_mode("Plain")
            except Exception:  # the learner's code replaced it: their tracebacks, their way
                mode = None
        self.running = "cell"
        try:
            self.shell.run_cell(code, store_history=history)
        except KeyboardInterrupt:  # landed in IPython's own bookkeeping, not in the cell
            self.add({"output_type": "error", "ename": "KeyboardInterrupt", "evalue": "", "traceback": []})
        finally:
            self.running = False
            if mode is not None and getattr(tb, "mode", None) == "Plain":  # a learner's own %xmode stays theirs
                tb.set_mode(mode)
        self._collect_fds()
        return {"outputs": self.outputs, "execution_count": count}

    def check_guard(self, nonce: str) -> str | None:
        """What the guard answers (the text of its repr, as a kernel's ``execute_result``)."""
        self.running = "guard"
        signal.setitimer(signal.ITIMER_REAL, GUARD_TIMEOUT)
        try:
            return repr(getattr(sys, self.guard)(nonce))
        except BaseException:  # removed, broken or stuck: no answer
            return None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            self.running = False
            self.shell.execution_count += 1  # a kernel runs the check as a cell of its own

    def serve(self) -> None:
        send(self.conn, {"ready": True, "pid": os.getpid()})
        socket.send_fds(self.conn, [b"L"], [self.ledger.fd])
        while True:
            message = recv(self.conn)
            if message is None or message.get("op") != "run":
                return
            self.run(message.get("cells"))

    def run(self, run) -> None:
        """Run a run of cells, each cell's progress and result in the ledger, then say done."""
        run = run if isinstance(run, list) else []
        self.ledger.reset()
        for index, cell in enumerate(run):
            cell = cell if isinstance(cell, dict) else {}
            nonce = cell.get("guard")
            reply: dict = {}
            if nonce is not None:
                # what the guard says is a note for a reviewer; the test cell runs either way
                self.ledger.begin(index, GUARD)
                reply["guard"] = self.check_guard(str(nonce))
            self.ledger.begin(index, CELL)  # the cell's own time starts now
            reply.update(self.run_cell(str(cell.get("code", "")), bool(cell.get("history", True)),
                                       plain_tracebacks=nonce is not None))
            self.ledger.record(reply)
        send(self.conn, {"done": len(run)})

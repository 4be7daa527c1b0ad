"""The Jupyter side of the kernel engine: a sandboxed kernel manager, a client without heartbeat,
and an nbclient client that caps outputs and marks a timed-out cell.

:mod:`grader.engines.kernel.engine` drives them, one submission across as many kernels as it needs.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
from pathlib import Path

import nbformat
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager

from grader.engines.execution import TIMEOUT_ENAME, ExecOptions
from grader.engines.isolation.budget import PIDS_MAX, Budget
from grader.engines.isolation.sandbox import Sandbox, gpu_devices, process_cap
from grader.engines.kernel.forked import ForkedProvisioner, WarmProcess

log = logging.getLogger(__name__)

MAX_STREAM = 2**20  # characters of stdout/stderr kept per cell (as the fork engine keeps)
MAX_CELL_OUTPUT = 32 * 2**20  # bytes of rich outputs (images, HTML, results) kept per cell
TRUNCATED = "\n[the grader kept only the first {n} characters of this output]\n"

#: Run in a fresh kernel after the guard, before any learner code: stdout and stderr pass on at
#: most MAX_STREAM characters a cell (the client keeps no more, and adds the note). Without it a
#: cell printing hundreds of MB makes ipykernel (7.x) buffer it all and die at the memory cap,
#: losing the cell; the fork engine's child caps at the source the same way. Learner code can
#: undo it: then only its own kernel is at stake.
CAP_STREAMS = f"""
def _course_cap_streams(limit):
    import sys
    class Capped:
        def __init__(self, stream):
            self._stream, self._used = stream, 0
        def write(self, text):
            if not isinstance(text, str):
                return self._stream.write(text)
            room = limit - self._used
            self._used += len(text)
            if room > 0:
                self._stream.write(text if len(text) <= room else text[:room])
            return len(text)
        def __getattr__(self, name):
            return getattr(self._stream, name)
    capped = [Capped(sys.stdout), Capped(sys.stderr)]
    sys.stdout, sys.stderr = capped
    def fresh(*_):
        for stream in capped:
            stream._used = 0
    get_ipython().events.register("pre_run_cell", fresh)
_course_cap_streams({MAX_STREAM + 1})
del _course_cap_streams
"""


class HeartbeatlessClient(AsyncKernelClient):
    """A kernel client without the heartbeat channel.

    nbclient asks the kernel manager (the process) whether the kernel lives, never the
    heartbeat; and the heartbeat's thread is the one part of the client that can block for
    ever: a kernel that writes into its own heartbeat socket leaves the thread in a ``recv``
    that ``stop_channels`` then joins without a timeout.
    """

    def start_channels(self, shell: bool = True, iopub: bool = True, stdin: bool = True, hb: bool = True,
                       control: bool = True) -> None:
        super().start_channels(shell=shell, iopub=iopub, stdin=stdin, hb=False, control=control)


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel command runs inside :class:`Sandbox`."""

    sandbox: Sandbox | None = None

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        cmd = super().format_kernel_cmd(extra_arguments)
        if self.sandbox is None:
            return cmd
        if cmd[1:3] == ["-m", "ipykernel_launcher"]:  # the kernel makes itself not dumpable first
            # and, in bubblewrap's user namespace, caps the processes of its sandbox (RLIMIT_NPROC
            # counts them there; see grader.engines.isolation.confine)
            nproc = ["--nproc", str(PIDS_MAX)] if self.sandbox.sandboxed() else []
            cmd = [cmd[0], "-m", "grader.engines.isolation.confine", "--kernel", *nproc, *cmd[3:]]
        return self.sandbox.wrap(cmd)

    # The kernel is interrupted (a cell past its timeout, and before every shutdown) by a message
    # on its control channel. A kernel whose learner code garbled its channels, or that died,
    # leaves that channel without a peer, and a send on it would wait forever (it hung a whole
    # batch): it must fail at once, and the kernel is then stopped or killed as if it had
    # ignored the interrupt.
    def _connect_control_socket(self) -> None:
        super()._connect_control_socket()
        self._control_socket.sndtimeo = 0
        self._control_socket.linger = 0

    async def _async_interrupt_kernel(self) -> None:
        import zmq

        try:
            await super()._async_interrupt_kernel()
        except zmq.Again:
            log.debug("the kernel's control channel took no interrupt (garbled or gone)")

    interrupt_kernel = _async_interrupt_kernel


def new_kernel_manager(options: ExecOptions, home: str, runtime: str, budget: Budget | None,
                       warm: WarmProcess | None = None) -> SandboxedKernelManager:
    """A manager for one of a submission's kernels: in a sandbox working in ``home``, with its
    connection files in ``runtime``, under the submission's ``budget`` (a cgroup) if it has one;
    with ``warm``, forked from that warm process (``home`` one of its folders) instead."""
    memory_mb, data_only = process_cap(options.memory_mb, options.device)
    km = SandboxedKernelManager(kernel_name="python3")
    km.client_factory = HeartbeatlessClient
    km.sandbox = None if warm is not None else Sandbox(
        workdir=Path(home),
        runtime_dir=Path(runtime),
        hide=[Path(p) for p in options.hide],
        memory_mb=memory_mb,
        isolate=options.isolate,
        budget=budget,
        devices=gpu_devices(options.device),
        data_only=data_only,
    )
    # IPC sockets work across the sandbox's network namespace; TCP would not.
    km.transport = "ipc"
    km.ip = os.path.join(runtime, f"k{secrets.token_hex(4)}")
    km.connection_file = os.path.join(runtime, f"kernel-{secrets.token_hex(4)}.json")
    km.kernel_spec.interrupt_mode = "message"  # signals would stop at the sandbox's init
    if warm is not None:
        km.provisioner = ForkedProvisioner.for_manager(km, warm, options, budget)
    return km


_JSON_MIME = re.compile(r"^application/(.*\+)?json$")


def _schema_content(msg_type: str | None, content: object) -> dict:
    """An output message's content as nbformat's schema allows it (nbclient validates each output,
    and one the kernel's process sent malformed -- ``text/plain`` a list of numbers -- would stop
    the kernel's whole run): text that is not a string or a list of strings is dropped."""
    if not isinstance(content, dict):
        return {}
    out = dict(content)
    if msg_type in ("display_data", "execute_result", "update_display_data"):
        data = content.get("data") if isinstance(content.get("data"), dict) else {}
        out["data"] = {str(k): v for k, v in data.items()
                       if _JSON_MIME.match(str(k)) or isinstance(v, str)
                       or (isinstance(v, list) and all(isinstance(x, str) for x in v))}
        out["metadata"] = content.get("metadata") if isinstance(content.get("metadata"), dict) else {}
    elif msg_type == "stream":
        out["name"] = content.get("name") if content.get("name") in ("stdout", "stderr") else "stdout"
        out["text"] = content.get("text") if isinstance(content.get("text"), str) else ""
    elif msg_type == "error":
        out["ename"], out["evalue"] = str(content.get("ename", "")), str(content.get("evalue", ""))
        trace = content.get("traceback")
        out["traceback"] = [str(t) for t in trace] if isinstance(trace, list) else []
    return out


def client_class():
    from jupyter_core.utils import run_sync
    from nbclient import NotebookClient

    class TimeoutAwareClient(NotebookClient):
        """nbclient answers a timed-out cell with an error *reply* but adds no error
        *output*; this client remembers the timeout and writes the output itself, so that
        a cell stopped mid-way can never look like a pass."""

        timed_out = False
        _sizes: dict = {}

        def output(self, outs, msg, display_id, cell_index):
            """Outputs capped per cell, as the fork engine caps them: streams at MAX_STREAM
            characters each (then a note), rich outputs at MAX_CELL_OUTPUT bytes in all."""
            content = _schema_content(msg.get("msg_type"), msg.get("content", {}))
            msg = {**msg, "content": content}
            if msg.get("msg_type") == "stream":
                name, text = content.get("name"), str(content.get("text", ""))
                used = self._sizes.get(name, 0)
                if used >= MAX_STREAM:
                    return None
                if used + len(text) >= MAX_STREAM:
                    text = text[: MAX_STREAM - used] + TRUNCATED.format(n=MAX_STREAM)
                    msg = {**msg, "content": {**content, "text": text}}
                self._sizes[name] = used + len(text)
            elif msg.get("msg_type") in ("display_data", "execute_result", "update_display_data", "error"):
                size = len(json.dumps(content.get("data", content), default=str))
                used = self._sizes.get("rich", 0)
                if used + size > MAX_CELL_OUTPUT:
                    return None
                self._sizes["rich"] = used + size
            out = super().output(outs, msg, display_id, cell_index)
            if out is not None and out.get("output_type") == "stream" and len(outs) > 1 and outs[-1] is out:
                before = outs[-2]  # a stream the kernel flushed in chunks: one output, as a notebook shows it
                if before.get("output_type") == "stream" and before.get("name") == out.get("name"):
                    before["text"] += out["text"]
                    outs.pop()
                    return before
            return out

        async def _async_handle_timeout(self, timeout, cell=None):
            self.timed_out = True
            return await super()._async_handle_timeout(timeout, cell)

        async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
            self.timed_out = False
            self._sizes = {}
            cell = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
            if self.timed_out:  # the client's own word: an output named like ours proves nothing
                cell.outputs.append(
                    nbformat.v4.new_output("error", ename=TIMEOUT_ENAME, evalue=self.error_on_timeout["evalue"], traceback=[])
                )
            return cell

        execute_cell = run_sync(async_execute_cell)

    return TimeoutAwareClient

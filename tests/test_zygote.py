"""Fork servers forked from one zygote: each as confined as a server in a sandbox of its own.

The zygote (grader/engines/fork/zygote.py) imports torch once for all of a batch's servers and gives
each its own pid, mount, IPC, UTS and network namespaces, /proc, /tmp, /dev/shm and folder,
and no capability. These tests run learner code in such servers and look for what a server in a
sandbox of its own would not show it: another server, the host's processes, a capability.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from grader.engines.execution import ExecOptions
from grader.engines.fork import pool as forkpool
from grader.engines.fork import start as forkstart
from grader.engines.isolation import sandbox
from grader.engines.isolation.mounts import HOST_PROC
from tests.test_forkengine import OPTIONS, run, text

pytestmark = pytest.mark.slow

nested = pytest.mark.skipif(sandbox.sandbox_level() != "nested",
                            reason="no nested namespaces here: each server gets a sandbox of its own")


@nested
def test_servers_are_forked_from_one_zygote():
    with forkpool.lease(OPTIONS) as first, forkpool.lease(OPTIONS) as second:
        servers = [first.server, second.server]
        assert all(isinstance(s, forkstart.ZygoteServer) for s in servers)
        assert servers[0].zygote is servers[1].zygote and servers[0].scratch != servers[1].scratch


@nested
def test_a_child_sees_only_its_own_servers_processes_and_nothing_of_the_hosts():
    ex = run(
        "import os\nsorted(int(p) for p in os.listdir('/proc') if p.isdigit())",
        f"import os\n(os.listdir('/run'), os.path.exists({HOST_PROC!r}), os.getppid())",
        "open('/proc/1/cmdline', 'rb').read().split(b'\\0')[1:3]",
    )
    pids = eval(text(ex.nb.cells[0]).removeprefix("[execute_result]"))
    assert pids[0] == 1 and len(pids) <= 3, pids  # the server (its namespace's init) and this child
    assert text(ex.nb.cells[1]) == "[execute_result]([], False, 1)"
    assert text(ex.nb.cells[2]) == "[execute_result][b'-m', b'grader.engines.fork.zygote']"


@nested
def test_a_child_has_no_capability_and_cannot_make_namespaces_or_mounts():
    ex = run(
        "caps = {}\nfor pid in ('self', '1'):\n"
        "    for line in open(f'/proc/{pid}/status'):\n"
        "        if line.startswith('Cap'):\n"
        "            caps[pid, line.split(':')[0]] = int(line.split(':')[1], 16)\n"
        "(len(caps), sum(caps.values()))",
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "[libc.unshare(flag) == -1 for flag in (0x20000, 0x10000000, 0x20000000, 0x40000000)]",
        "import subprocess\n[subprocess.run(cmd, capture_output=True).returncode != 0 for cmd in "
        "(['mount', '-t', 'tmpfs', 'x', '/tmp'], ['umount', '/proc'], ['umount', '-l', '/tmp'])]",
        "open('/proc/sys/kernel/hostname', 'w').write('x')",
    )
    assert text(ex.nb.cells[0]) == "[execute_result](10, 0)"  # five sets, this child's and its server's
    assert text(ex.nb.cells[1]) == "[execute_result][True, True, True, True]"
    assert text(ex.nb.cells[2]) == "[execute_result][True, True, True]"
    assert "Read-only file system" in text(ex.nb.cells[3])


@nested
def test_a_child_cannot_see_or_write_another_servers_folder_or_its_tmp():
    with forkpool.lease(OPTIONS) as held:  # another server, busy meanwhile
        other = held.server
        other.wait_ready()
        ex = run(
            "import os\nos.getcwd()",
            f"import os\n(os.path.exists({other.scratch!r}), os.listdir(os.path.dirname({other.scratch!r})))",
            f"import os\nos.makedirs({other.scratch!r} + '/planted')",
        )
        # under /tmp that path is free in the child's own private /tmp: what it writes lands there
        assert os.path.isdir(other.scratch) and not os.path.exists(os.path.join(other.scratch, "planted"))
    mine = text(ex.nb.cells[0]).removeprefix("[execute_result]").strip("'")
    server_folder = mine.rsplit("/", 1)[0]
    assert server_folder != other.scratch
    exists, listing = eval(text(ex.nb.cells[1]).removeprefix("[execute_result]"))
    assert not exists and listing == [server_folder.rsplit("/", 1)[1]]


@nested
def test_a_child_cannot_kill_its_server_with_sigkill_and_has_loopback_only():
    ex = run(
        "import os, signal, time\nos.kill(1, signal.SIGKILL); os.kill(1, signal.SIGSTOP); time.sleep(0.5)\nx = 1",
        "x + 1",
        "import socket\nserver = socket.socket(); server.bind(('127.0.0.1', 0)); server.listen()\n"
        "client = socket.create_connection(server.getsockname(), timeout=2)\n"
        "peer, _ = server.accept(); client.sendall(b'hi'); peer.recv(2)",
        "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=2); net = 'online'\n"
        "except OSError:\n    net = 'offline'\nnet",
    )
    assert ex.died == [] and ex.restarts == 0
    assert [text(c) for c in ex.nb.cells] == ["", "[execute_result]2", "[execute_result]b'hi'", "[execute_result]'offline'"]


def test_without_a_sandbox_servers_are_forked_from_a_zygote_too():
    options = dataclasses.replace(OPTIONS, isolate=False)
    with forkpool.lease(options) as held:
        assert isinstance(held.server, forkstart.ZygoteServer)
    assert text(run("import sys\n'torch' in sys.modules", options=options).nb.cells[0]) == "[execute_result]True"


@pytest.mark.skipif(not sandbox.bubblewrap_works(), reason="bubblewrap cannot sandbox on this machine")
def test_where_nesting_is_refused_each_server_gets_a_sandbox_of_its_own(monkeypatch):
    """The kernel mounts a new /proc only where a wholly visible one exists: without the
    host's, the probe fails and servers are started as before, one sandbox each."""
    real = sandbox.bwrap_args

    def without_host_proc(*args, **kwargs):
        out = real(*args, **kwargs)
        if kwargs.get("nest") and HOST_PROC in out:
            at = out.index(HOST_PROC)
            del out[at - 2:at + 1]
        return out

    forkpool.shutdown()
    sandbox.sandbox_level.cache_clear()
    monkeypatch.setattr(sandbox, "bwrap_args", without_host_proc)
    try:
        assert sandbox.sandbox_level() == "plain"
        options = ExecOptions(cell_timeout=3)
        assert not forkstart.zygote_serves(options)
        with forkpool.lease(options) as held:
            assert type(held.server) is forkstart.Server
        assert text(run("6 * 7", options=options).nb.cells[0]) == "[execute_result]42"
    finally:
        forkpool.shutdown()
        sandbox.sandbox_level.cache_clear()


def test_without_a_sandbox_a_zygote_server_still_kills_what_a_child_leaves_behind():
    """A fork does not inherit the subreaper attribute: a server forked from the zygote sets it
    again, so a double-forked process of a child comes back to it and is killed."""
    marker = "course-leftover-" + os.urandom(4).hex()
    options = dataclasses.replace(OPTIONS, isolate=False)
    ex = run(
        "import os, subprocess, time\nr, w = os.pipe()\nif os.fork() == 0:\n"
        f"    p = subprocess.Popen(['sleep', '300'], start_new_session=True, env={{'M': {marker!r}}})\n"
        "    os.write(w, str(p.pid).encode()); os._exit(0)\n"
        "os.close(w); os.wait(); pid = int(os.read(r, 20))\ntime.sleep(0.2)\n"
        f"{marker!r}.encode() in open(f'/proc/{{pid}}/environ', 'rb').read()",
        options=options,
    )
    assert text(ex.nb.cells[0]) == "[execute_result]True"  # it was running, orphaned
    assert not _alive_with_env(marker, wait=5.0)


def _alive_with_env(marker: str, wait: float) -> bool:
    import time

    deadline = time.monotonic() + wait
    while True:
        found = False
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    found = found or marker.encode() in f.read()
            except OSError:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_a_zygote_with_a_lent_server_outlives_another_batchs_first_server():
    """A long-lived process (a Dask worker) stops what another batch started once it is idle:
    never the zygote of a server that is still lent."""
    first = dataclasses.replace(OPTIONS, preload=["xml.dom.minidom"])
    with forkpool.lease(first) as held:
        held.server.wait_ready()
        assert text(run("6 * 7").nb.cells[0]) == "[execute_result]42"  # other options: evicts the rest
        assert held.server.alive() and held.server.healthy()
    forkpool.shutdown()


@nested
def test_a_zygote_whose_server_fails_to_start_hands_over_to_servers_of_their_own(monkeypatch, caplog):
    """A server that cannot make its namespaces exits before it serves; the submission gets a
    server in a sandbox of its own, and so does every later one of that zygote's batch."""
    forkpool.shutdown()
    real = forkstart.Zygote.fork_server

    def folder_gone(zygote, theirs):  # the server cannot bind its folder: isolate() fails
        scratch = real(zygote, theirs)
        os.rmdir(scratch)
        return scratch

    monkeypatch.setattr(forkstart.Zygote, "fork_server", folder_gone)
    try:
        with caplog.at_level("WARNING"):
            ex = run("6 * 7")
            assert text(ex.nb.cells[0]) == "[execute_result]42" and ex.error is None
            with forkpool.lease(OPTIONS) as held:
                assert type(held.server) is forkstart.Server
        assert any("did not start" in r.getMessage() for r in caplog.records)
    finally:
        forkpool.shutdown()


def test_course_fork_zygote_0_starts_every_server_in_a_sandbox_of_its_own(monkeypatch):
    """What ``make bench`` compares the zygote with (``fork-own``)."""
    monkeypatch.setenv("COURSE_FORK_ZYGOTE", "0")
    assert not forkstart.zygote_serves(OPTIONS)
    monkeypatch.delenv("COURSE_FORK_ZYGOTE")
    assert forkstart.zygote_serves(OPTIONS) == (not sandbox.bubblewrap_works() or sandbox.sandbox_level() == "nested")


def test_a_server_closed_by_two_threads_closes_its_descriptors_once(tmp_path):
    """A worker releasing its lease and the coordinator stopping the batch (Ctrl-C) can close one
    server at once: the second close does nothing, rather than raise EBADF or close a descriptor
    another thread opened meanwhile under the same number."""
    import socket
    import subprocess
    import threading

    proc = subprocess.Popen(["sleep", "60"])
    server = object.__new__(forkstart.ZygoteServer)
    server.ctrl, theirs = socket.socketpair()
    server.pidfd = os.pidfd_open(proc.pid)
    server.root = str(tmp_path / "server")
    os.mkdir(server.root)
    assert server.alive()
    server.close()
    reused = os.open(os.devnull, os.O_RDONLY)  # the lowest free number: the pidfd's, likely
    errors = []

    def close_again():
        try:
            server.close()
        except Exception as exc:  # noqa: BLE001 - the test reports what a second close raised
            errors.append(exc)

    threads = [threading.Thread(target=close_again) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    os.fstat(reused)  # still open: no second close took it
    os.close(reused)
    assert proc.wait(timeout=10) == -9 and not server.alive() and not os.path.exists(server.root)
    theirs.close()

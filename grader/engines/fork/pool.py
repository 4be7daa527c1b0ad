"""Warm fork servers: started once per worker, each lent to one submission at a time.

A server (:mod:`grader.engines.fork.server`) runs with a grading kernel's environment and
inside a sandbox, and is kept for the next submission. It is forked from the batch's zygote
where it can be (:mod:`grader.engines.fork.start`: the servers then share one import of torch),
else started in a sandbox of its own. Servers are started from one long-lived thread (a server
dies with the thread that started it), stopped when the process exits, and replaced when one
dies (a submission can kill its server; the OOM killer can too).
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from grader.engines.execution import ExecOptions
from grader.engines.fork.start import (
    Server,
    StartError,
    Stopped,
    Zygote,
    ZygoteServer,
    server_key,
    zygote_serves,
)

__all__ = ["Lease", "Server", "StartError", "Stopped", "lease", "prestart", "server_key", "shutdown", "stopped"]


_lock = threading.Lock()
_idle: dict[tuple, list[Server]] = {}
_servers: list[Server] = []
_zygotes: dict[tuple, Zygote] = {}


def _evict_others(key: tuple) -> None:
    """Stop idle servers started for other options (another batch's folders), and their zygotes
    once no server of theirs is lent: a long-lived process, such as a Dask worker, keeps only
    the servers it can use."""
    with _lock:
        stale = [s for k, pool in _idle.items() if k != key for s in pool]
        for k in [k for k in _idle if k != key]:
            del _idle[k]
        for server in stale:
            _servers.remove(server)
        lent = {id(s.zygote) for s in _servers}
        old = [z for k, z in _zygotes.items() if k != key and id(z) not in lent]
        for zygote in old:
            del _zygotes[zygote.key]
    for server in stale:
        server.close()
    for zygote in old:
        zygote.close()


def _new_server(options: ExecOptions) -> Server:
    key = server_key(options)
    _evict_others(key)
    server = None
    if zygote_serves(options):
        with _lock:
            zygote = _zygotes.get(key)
            dead = zygote if zygote is not None and not zygote.alive() else None
            if zygote is None or dead is not None:
                zygote = _zygotes[key] = Zygote(options)
        if dead is not None:  # killed (the OOM killer): its folder and budget go too
            dead.close()
        if not zygote.broken:
            try:
                server = ZygoteServer(options, zygote)
            except StartError:
                pass  # a zygote that died: a server of its own, this time
    if server is None:
        server = Server(options)
    with _lock:
        _servers.append(server)
    return server


def prestart(options: ExecOptions, count: int) -> None:
    """Start ``count`` servers now, so that they import torch while the coordinator prepares."""
    key = server_key(options)
    with _lock:
        missing = count - len([s for s in _idle.get(key, []) if s.alive()])
    for _ in range(max(0, missing)):
        server = _new_server(options)
        with _lock:
            _idle.setdefault(key, []).append(server)


class Lease:
    """The server one submission uses, alone; replaced if it dies mid-way (a submission can kill it)."""

    def __init__(self, options: ExecOptions):
        self.options, self.key = options, server_key(options)
        with _lock:
            pool = _idle.setdefault(self.key, [])
            found = [s for s in pool if s.alive()]
            dead = [s for s in pool if not s.alive()]
            pool.clear()
            pool.extend(found[:-1])
            for server in dead:
                _servers.remove(server)
        for server in dead:
            server.close()
        self.server = found[-1] if found else _new_server(options)

    def renew(self) -> None:
        _discard(self.server)
        self.server = _new_server(self.options)

    def release(self) -> None:
        if not self.server.healthy():  # dead, stopped or wedged by the last submission: not lent again
            _discard(self.server)
            return
        with _lock:
            _idle.setdefault(self.key, []).append(self.server)


def stopped(server: Server) -> bool:
    """Whether :func:`shutdown` stopped ``server`` (a leased server leaves the list no other way
    while leased: its holder discards it only after this question)."""
    with _lock:
        return server not in _servers


def _discard(server: Server) -> None:
    with _lock:
        if server in _servers:
            _servers.remove(server)
    server.close()


@contextmanager
def lease(options: ExecOptions) -> Iterator[Lease]:
    """A server for these options, used by no one else meanwhile (its children run one at a time)."""
    held = Lease(options)
    try:
        yield held
    finally:
        held.release()


@atexit.register
def shutdown() -> None:
    """Stop every server (each takes its children with it)."""
    with _lock:
        servers = list(_servers)
        _servers.clear()
        _idle.clear()
        zygotes = list(_zygotes.values())
        _zygotes.clear()
    for server in servers:
        server.close()
    for zygote in zygotes:
        zygote.close()

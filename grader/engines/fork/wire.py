"""The fork engine's wire: messages between the coordinator, a server and its children.

A 4-byte length, then JSON -- never pickle: a child runs untrusted code.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import time

from grader import jsonio

MAX_MESSAGE = 64 * 2**20
MAX_STREAM = 2**20  # characters of stdout/stderr kept per cell
HEADER = struct.Struct("!I")


def frame(message: dict) -> bytes:
    """One message as it goes on the wire (or into a child's ledger)."""
    data = json.dumps(message, default=_json_default).encode("utf-8")
    return HEADER.pack(len(data)) + data


def send(sock: socket.socket, message: dict) -> None:
    """Send one message."""
    sock.sendall(frame(message))


def recv(sock: socket.socket, deadline: float | None = None) -> dict | None:
    """Receive one message; None when the other side closed the connection.

    ``deadline`` (a ``time.monotonic()`` value) bounds the whole message, however it is
    dribbled: past it, ``TimeoutError``.

    Raises:
        ValueError: the message is too long or not a JSON object.
        TimeoutError: the deadline passed.
    """
    head = _recv_exactly(sock, HEADER.size, deadline)
    if head is None:
        return None
    (size,) = HEADER.unpack(head)
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes is over the limit")
    body = _recv_exactly(sock, size, deadline)
    if body is None:
        return None
    message = jsonio.loads(body.decode("utf-8"))
    if not isinstance(message, dict):
        raise ValueError("a message must be a JSON object")
    return message


def _recv_exactly(sock: socket.socket, size: int, deadline: float | None = None) -> bytes | None:
    chunks, left = [], size
    while left:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the message did not arrive in time")
            sock.settimeout(remaining)
        chunk = sock.recv(min(left, 2**20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _json_default(obj):
    if isinstance(obj, bytes):  # images from IPython's formatters
        return base64.b64encode(obj).decode("ascii")
    return repr(obj)

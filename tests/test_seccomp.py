"""No process of the sandbox reaches the kernel keyrings (grader.engines.isolation.seccomp), whatever ABI
it calls the kernel through; outside the sandbox the same calls work."""

from __future__ import annotations

import errno
import os
import platform
import struct
import subprocess
import sys

import pytest

from grader.engines.isolation.sandbox import Sandbox, bubblewrap_problem, bubblewrap_works
from grader.engines.isolation.seccomp import KEYRING_CALLS, keyring_filter

ALLOW, REFUSE = 0x7FFF0000, 0x00050000 | errno.EPERM


def run_filter(program: bytes, arch: int, nr: int) -> int:
    """What the classic-BPF program returns for a system call (the kernel's reading of it)."""
    insns = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    data = struct.pack("=iI", nr if nr < 2**31 else nr - 2**32, arch)
    acc, pc = 0, 0
    for _ in range(len(insns) + 1):  # no backward jumps in classic BPF: each runs at most once
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld word at offset k
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x35:
            pc += jt if acc >= k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        pc += 1
    raise AssertionError("the program ran past its end")


@pytest.mark.parametrize("arch", sorted(KEYRING_CALLS))
def test_the_filter_refuses_the_keyring_calls_of_every_abi_and_allows_the_rest(arch):
    program = keyring_filter()
    calls, x32 = KEYRING_CALLS[arch]
    for nr in calls:
        assert run_filter(program, arch, nr) == REFUSE, (hex(arch), nr)
    others = [n for n in range(0, 460) if n not in calls]
    assert all(run_filter(program, arch, n) == ALLOW for n in others)
    if x32:  # the x32 ABI: the same numbers with bit 30 set, refused whatever they are
        assert all(run_filter(program, arch, 0x40000000 | n) == REFUSE for n in (*calls, 0, 1, 59))
    # another architecture's numbers for the keyring calls are ordinary calls here
    assert run_filter(program, 0x1234, calls[0]) == ALLOW


KEYRING_PROGRAM = r"""
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
native = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[platform.machine()]
add_key, request_key, keyctl = native
answers = []
for call in ((add_key, b"user", b"course-probe", b"x", 1, -2),  # a key in the process keyring
             (request_key, b"user", b"course-probe", None, -2),
             (keyctl, 0, -2, 0)):  # KEYCTL_GET_KEYRING_ID of the process keyring
    answers.append("ok" if libc.syscall(*call) >= 0 else os.strerror(ctypes.get_errno()))
print(*answers, sep=";")
"""

INT80_PROGRAM = r"""
import ctypes, mmap
# push rbx; mov eax, 286 (add_key in the i386 ABI); xor ebx, ebx; int 0x80; pop rbx; ret
code = bytes.fromhex("53" "b81e010000" "31db" "cd80" "5b" "c3")
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
print(ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))())
"""


def _needs_sandbox():
    if not bubblewrap_works():
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"the keyring checks need the bubblewrap sandbox: {bubblewrap_problem()}")
        pytest.skip(f"bubblewrap is not usable here ({bubblewrap_problem()})")


def _run(code: str, tmp_path, sandboxed: bool) -> str:
    cmd = [sys.executable, "-c", code]
    if sandboxed:
        cmd = Sandbox(workdir=tmp_path, memory_mb=None).wrap(cmd)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_keyring_calls_work_outside_and_are_refused_inside_the_sandbox(tmp_path):
    _needs_sandbox()
    outside = _run(KEYRING_PROGRAM, tmp_path, sandboxed=False).split(";")
    assert outside == ["ok", "ok", "ok"], outside
    assert _run(KEYRING_PROGRAM, tmp_path, sandboxed=True).split(";") == [os.strerror(errno.EPERM)] * 3


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the i386 entry (int 0x80) is x86-64's")
def test_the_i386_entry_of_an_x86_64_process_is_refused_too(tmp_path):
    _needs_sandbox()
    # outside, the call reaches add_key, which rejects its null type; inside, the filter answers
    assert int(_run(INT80_PROGRAM, tmp_path, sandboxed=False)) not in (-errno.EPERM, -errno.ENOSYS)
    assert int(_run(INT80_PROGRAM, tmp_path, sandboxed=True)) == -errno.EPERM

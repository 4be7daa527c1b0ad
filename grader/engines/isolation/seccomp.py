"""A seccomp filter for the sandbox: no kernel keyrings (``add_key``, ``request_key``, ``keyctl``).

A user's keyrings belong to its uid in its user namespace and outlive the processes that
filled them. Every child of a fork server runs as the same uid in the same user namespace,
one after another, so a key one submission added would still be there for the next: a
channel from one learner's code to another's that no folder cleanup empties. Nothing a
notebook needs uses keyrings (container runtimes refuse them by default for the same
reason), so every process of the sandbox gets ``EPERM`` for them.

The filter is classic BPF over ``struct seccomp_data`` (``nr`` at offset 0, ``arch`` at 4), as
bubblewrap's ``--seccomp FD`` reads it: one block per architecture a process of this machine
can call the kernel as (x86-64 and its i386 and x32 ABIs; arm64 and its 32-bit ABI), each
refusing the three calls; any other call is allowed.
"""

from __future__ import annotations

import errno
import struct

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_X32_BIT = 0x40000000

#: audit architecture -> (add_key, request_key, keyctl) in that ABI, and whether it has x32.
KEYRING_CALLS = {
    0xC000003E: ((248, 249, 250), True),  # x86-64 (x32 calls are the same numbers | 0x40000000)
    0x40000003: ((286, 287, 288), False),  # i386, reachable from an x86-64 process by int 0x80
    0xC00000B7: ((217, 218, 219), False),  # arm64
    0x40000028: ((309, 310, 311), False),  # 32-bit arm on arm64
}


def keyring_filter() -> bytes:
    """The filter program (``struct sock_filter`` records), refusing the keyring calls with EPERM."""
    program: list[tuple[int, int, int, int]] = []
    for arch, (calls, x32) in KEYRING_CALLS.items():
        checks = len(calls) + (1 if x32 else 0)
        # load the arch; if it is not this one, skip this block (1 load + checks + 2 returns)
        program += [(_LD_W_ABS, 0, 0, 4), (_JEQ, 0, 1 + checks + 2, arch), (_LD_W_ABS, 0, 0, 0)]
        block = []
        if x32:
            block.append((_JGE, 0, 0, _X32_BIT))
        block += [(_JEQ, 0, 0, nr) for nr in calls]
        # every check jumps to this block's "refuse" when it matches: past the rest and the allow
        for k, (code, _, _, value) in enumerate(block):
            block[k] = (code, len(block) - k, 0, value)
        program += block + [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _ERRNO | errno.EPERM)]
    program.append((_RET, 0, 0, _ALLOW))
    return b"".join(struct.pack("=HBBI", *insn) for insn in program)

"""``python -m grader.limits --memory-mb N -- CMD...``: run CMD under resource limits.

The grader starts every kernel through this, so that a memory bomb in a submission fails
inside that kernel (MemoryError / "can't allocate memory") instead of taking the machine down.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys


def apply(memory_mb: int | None, cpu_seconds: int | None = None) -> None:
    """Cap this process's address space and CPU time; no core dumps."""
    if memory_mb:
        limit = memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if cpu_seconds:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.limits")
    parser.add_argument("--memory-mb", type=int, default=None)
    parser.add_argument("--cpu-seconds", type=int, default=None)
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("no command given")
    apply(args.memory_mb, args.cpu_seconds)
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main(sys.argv[1:])

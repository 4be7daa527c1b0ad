"""What a kernel costs before a learner's first cell: started fresh, as the kernel engine starts
each of its kernels, against forked from a warm process that imported and warmed it all once.

``python benchmarks/kernel_start.py [--kernels N]`` starts N kernels one after the other each way,
without a sandbox (the same for both), and in each runs what the kernel engine runs before the
first cell: the guard and the modules every kernel imports (``grader.prepare.integrity``), with
the warm-up where nothing warmed it before. It prints the machine's busy CPU and the wall-clock
time a kernel took from its request to the guard's reply, each way, side by side in one run.

This measures a design the kernel engine does not have (docs/engines.md, "Taken next"): the
forked kernels here get no namespaces, budget or sandbox of their own.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.prepare import integrity  # noqa: E402

#: The warm process: imports what every kernel imports, warms it, then forks a kernel for each
#: connection file it is sent (one line each on its stdin), answering each with the kernel's pid.
WARM = f"""
import importlib, os, sys
for m in {integrity.PRELOAD!r}:
    try:
        importlib.import_module(m)
    except Exception:
        pass
{integrity.FIXED_INPUTS}
{integrity.WARM_UP}
from ipykernel.kernelapp import IPKernelApp
print("ready", flush=True)
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        IPKernelApp.launch_instance(argv=["-f", line.strip()])
        os._exit(0)
    print(pid, flush=True)
"""


def busy_cpu() -> float:
    with open("/proc/stat", encoding="ascii") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in f.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def guard_reply(client, code: str) -> None:
    """Run ``code`` in the kernel and wait for its reply (what the engine does before a first cell)."""
    client.wait_for_ready(timeout=120)
    reply = client.execute_interactive(code, timeout=120)
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"the kernel did not run the guard: {reply['content']}")


def fresh(count: int, work: str) -> list[float]:
    from jupyter_client.manager import KernelManager

    times = []
    for i in range(count):
        start = time.monotonic()
        km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(work, f"f{i}"),
                           connection_file=os.path.join(work, f"fresh-{i}.json"))
        km.start_kernel(cwd=work, stdout=open(os.devnull, "wb"), stderr=open(os.devnull, "wb"))
        client = km.client()
        client.start_channels()
        try:
            guard_reply(client, integrity.install_code(integrity.new_guard_name()))
        finally:
            client.stop_channels()
            km.shutdown_kernel(now=True)
        times.append(time.monotonic() - start)
    return times


def forked(count: int, work: str) -> tuple[list[float], float]:
    """The kernels' times, and what the warm process cost before the first (CPU seconds, machine-wide)."""
    import subprocess

    from jupyter_client import BlockingKernelClient
    from jupyter_client.connect import write_connection_file

    before = busy_cpu()
    warm = subprocess.Popen([sys.executable, "-c", WARM], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            cwd=work)
    assert warm.stdout.readline().strip() == "ready"
    warming = busy_cpu() - before
    times = []
    try:
        for i in range(count):
            start = time.monotonic()
            path = os.path.join(work, f"forked-{i}.json")
            write_connection_file(path, transport="ipc", ip=os.path.join(work, f"k{i}"), shell_port=1, iopub_port=2,
                                  stdin_port=3, control_port=4, hb_port=5)
            warm.stdin.write(path + "\n")
            warm.stdin.flush()
            pid = int(warm.stdout.readline())
            client = BlockingKernelClient(connection_file=path)
            client.load_connection_file()
            client.start_channels()
            try:
                guard_reply(client, integrity.install_code(integrity.new_guard_name(), warm_up=False))
            finally:
                client.stop_channels()
                os.kill(pid, 9)
            times.append(time.monotonic() - start)
    finally:
        warm.stdin.close()
        warm.wait(timeout=30)
    return times, warming


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=8, help="kernels started each way (default 8)")
    args = parser.parse_args(argv)
    socket.setdefaulttimeout(None)
    with tempfile.TemporaryDirectory(prefix="kernel-start-") as work:
        fresh(1, work)  # the page cache filled for both ways alike
        before = busy_cpu()
        fresh_times = fresh(args.kernels, work)
        fresh_cpu = busy_cpu() - before
        before = busy_cpu()
        forked_times, warming = forked(args.kernels, work)
        forked_cpu = busy_cpu() - before - warming
    n = args.kernels
    print(f"{n} kernels each way, one after the other, no sandbox (load average {os.getloadavg()[0]:.2f})")
    print(f"{'':34s}{'CPU s / kernel':>16s}{'median wall s':>15s}")
    print(f"{'fresh (as the kernel engine now)':34s}{fresh_cpu / n:16.3f}{statistics.median(fresh_times):15.3f}")
    print(f"{'forked from a warm process':34s}{forked_cpu / n:16.3f}{statistics.median(forked_times):15.3f}")
    print(f"the warm process itself, once: {warming:.2f} s CPU; CPU a kernel, fresh / forked: "
          f"{fresh_cpu / max(forked_cpu, 1e-9):.1f}x")


if __name__ == "__main__":
    main()

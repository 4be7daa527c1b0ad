"""What a kernel costs before a learner's first cell: started fresh, as the kernel engine starts
each of its kernels, against forked from a warm process that imported and warmed it all once.

``python benchmarks/kernel_start.py [--kernels N]`` starts N kernels one after the other each way
and in each runs what the kernel engine runs before the
first cell: the guard and the modules every kernel imports (``grader.prepare.integrity``), with
the warm-up where nothing warmed it before. It prints the machine's busy CPU and the wall-clock
time a kernel took from its request to the guard's reply, each way, side by side in one run.

The third way is what the kernel engine does (:mod:`grader.engines.kernel.warm`), less the
budget and the per-process limits, which cost nothing before the first cell; the first is what
it does for CUDA or with ``COURSE_KERNEL_FORK=0`` (docs/engines.md, "A kernel's start").
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.engines.execution import ExecOptions, kernel_env  # noqa: E402
from grader.prepare import integrity  # noqa: E402

#: The warm process: imports what every kernel imports, warms it, then forks a kernel for each
#: connection file it is sent (one line each on its stdin), answering each with the kernel's pid.
WARM = f"""
import importlib, os, sys
NESTED = sys.argv[1:] == ["--nested"]
if NESTED:  # first of all, as the fork engine's zygote does
    from grader.engines.isolation.namespaces import SERVER_NS, cover_host_proc, isolate, unshare
    cover_host_proc()
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
    scratch = os.path.dirname(line.strip())
    pid = os.fork()
    if pid == 0:
        if NESTED:  # namespaces of its own, its folder alone, no capability left: as the engine
            unshare(SERVER_NS)  # forks it, pid 2 under an init (pid 1) that waits for it
            if os.fork():
                os.wait()
                os._exit(0)
            isolate(scratch)
            if os.fork():
                os.wait()
                os._exit(0)
        os.chdir(scratch)
        os.environ.update(HOME=scratch, TMPDIR=scratch)
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
        km.start_kernel(cwd=work, env=kernel_env(ExecOptions(), work), stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
        client = km.client()
        client.start_channels()
        try:
            guard_reply(client, integrity.install_code(integrity.new_guard_name()))
        finally:
            client.stop_channels()
            km.shutdown_kernel(now=True)
        times.append(time.monotonic() - start)
    return times


def forked(count: int, work: str, nested: bool = False) -> tuple[list[float], float]:
    """The kernels' times, and what the warm process cost before the first (CPU seconds, machine-wide).
    ``nested``: the warm process in the fork engine's nested sandbox, each kernel in namespaces of
    its own (:mod:`grader.engines.isolation.namespaces`), seeing only its folder."""
    from jupyter_client import BlockingKernelClient
    from jupyter_client.connect import write_connection_file

    from grader.engines.isolation.sandbox import Sandbox

    root = os.path.join(work, "nested" if nested else "plain")
    os.mkdir(root)
    cmd = [sys.executable, "-c", WARM, *(["--nested"] if nested else [])]
    if nested:
        cmd = Sandbox(workdir=Path(root), memory_mb=None, nest=True).wrap(cmd)
    before = busy_cpu()
    warm = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root,
                            env=kernel_env(ExecOptions(), root))
    assert warm.stdout.readline().strip() == "ready"
    warming = busy_cpu() - before
    times = []
    try:
        for i in range(count):
            start = time.monotonic()
            scratch = os.path.join(root, f"k{i}")
            os.mkdir(scratch)
            path = os.path.join(scratch, "kernel.json")
            write_connection_file(path, transport="ipc", ip=os.path.join(scratch, "k"), shell_port=1, iopub_port=2,
                                  stdin_port=3, control_port=4, hb_port=5)
            warm.stdin.write(path + "\n")
            warm.stdin.flush()
            warm.stdout.readline()
            client = BlockingKernelClient(connection_file=path)
            client.load_connection_file()
            client.start_channels()
            try:
                guard_reply(client, integrity.install_code(integrity.new_guard_name(), warm_up=False))
            finally:
                client.shutdown()  # the kernel exits by itself (its pid is another namespace's)
                client.stop_channels()
            times.append(time.monotonic() - start)
    finally:
        warm.stdin.close()
        warm.wait(timeout=30)
    return times, warming


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=8, help="kernels started each way (default 8)")
    args = parser.parse_args(argv)
    from grader.engines.isolation.sandbox import sandbox_level

    nested = sandbox_level() == "nested"
    with tempfile.TemporaryDirectory(prefix="kernel-start-") as work:
        fresh(1, work)  # the page cache filled for both ways alike
        before = busy_cpu()
        fresh_times = fresh(args.kernels, work)
        fresh_cpu = busy_cpu() - before
        rows = [("fresh (a sandbox of its own)", fresh_cpu, fresh_times, None)]
        for way, title in [(False, "forked from a warm process"), (True, "forked, namespaces of its own")][:1 + nested]:
            before = busy_cpu()
            times, warming = forked(args.kernels, work, nested=way)
            rows.append((title, busy_cpu() - before - warming, times, warming))
    n = args.kernels
    print(f"{n} kernels each way, one after the other (load average {os.getloadavg()[0]:.2f}); the fresh and")
    print("plain forked kernels run without a sandbox" + ("" if nested else "; no nested sandbox on this machine"))
    print(f"{'':34s}{'CPU s / kernel':>16s}{'median wall s':>15s}{'warm process, once':>20s}")
    for title, cpu, times, warming in rows:
        once = f"{warming:.2f} s CPU" if warming is not None else "-"
        print(f"{title:34s}{cpu / n:16.3f}{statistics.median(times):15.3f}{once:>20s}")


if __name__ == "__main__":
    main()

"""How much importing course_utils adds to `import torch` (median of N fresh interpreters each).

    python benchmarks/import_time.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES = {
    "import torch": "import torch",
    "import course_utils": "import course_utils",
    "import course_utils; show_grid": "import course_utils; course_utils.show_grid",
}


def measure(code: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    measure("import torch", 1)  # warm the page cache
    # interleave the cases, so that a noisy machine affects them alike
    results = {name: [] for name in CASES}
    for _ in range(args.repeat):
        for name, code in CASES.items():
            results[name].append(measure(code, 1))
    base = statistics.median(results["import torch"])
    for name, values in results.items():
        med = statistics.median(values)
        print(f"{name:<34} {med:6.3f} s   ({med - base:+.3f} s vs import torch)")


if __name__ == "__main__":
    main()

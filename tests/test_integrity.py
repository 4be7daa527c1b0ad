"""What runs before learner code in every grading process (grader.prepare.integrity): the hidden tests'
inputs do not depend on what else the process imported; and what the static scan notes for a
reviewer (never a score): tampering with the checking machinery, and never ordinary code."""

from __future__ import annotations

import subprocess
import sys

import pytest

from grader.prepare.integrity import FIXED_INPUTS

#: A derandomised hidden test as the chapters write them: it records what hypothesis drew. Run
#: once, then again after the process imported a module of the learner's own, whose constants
#: hypothesis's "local constants" pool would take in.
PROGRAM = '''
import sys
sys.path.insert(0, sys.argv[1])
{prelude}
from hypothesis import given, settings, strategies as st

def draws():
    seen = []
    @settings(max_examples=60, derandomize=True, database=None, deadline=None)
    @given(st.integers(1, 100_000), st.floats(-10, 10, allow_nan=False), st.text(max_size=8))
    def test(n, x, s):
        seen.append((n, x, s))
    test()
    return seen

before = draws()
import learner_tools  # written with %%writefile by the learner
after = draws()
print("same" if before == after else "different")
'''

LEARNER_MODULE = '''"""Settings I used while working on the exercises."""
SIZES = [3, 7, 11, 250, 4096, 100000, 65536, 1234, 777]
SCALES = [0.125, 2.5, -3.75, 1e-3, 9.5]
NAMES = ["batch", "hidden", "logits"]
'''


def _run(tmp_path, prelude: str) -> str:
    (tmp_path / "learner_tools.py").write_text(LEARNER_MODULE)
    program = PROGRAM.format(prelude=prelude)
    out = subprocess.run([sys.executable, "-c", program, str(tmp_path)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_a_module_the_learner_wrote_and_imported_leaves_the_hidden_inputs_as_they_were(tmp_path):
    assert _run(tmp_path, FIXED_INPUTS) == "same"


def test_without_the_fixed_inputs_such_a_module_changes_what_hypothesis_draws(tmp_path):
    """The hazard the fixed inputs remove, shown on the installed hypothesis (which has the pool)."""
    from hypothesis.internal.conjecture import providers

    assert hasattr(providers, "_get_local_constants"), "this hypothesis has no local-constants pool"
    assert _run(tmp_path, "") == "different"


TAMPERING = [
    "import course_utils.observe as _o\n_real = _o.emit\n_o.emit = lambda *a, **k: None\n",
    "from course_utils import observe\nobserve.assert_ = lambda *a, **k: None\n",
    "from course_utils import checks as c\nsetattr(c, 'check_tensor', print)\n",
    "import course_utils\nvars(course_utils.checks)['check_value'] = print\n",
    "import importlib\nm = importlib.import_module('course_utils.observe')\n",
    "from course_utils.checks import check_tensor\ncheck_tensor.__code__ = (lambda *a, **k: None).__code__\n",
    "import course_utils as cu\ndel cu.observe.emit\n",
    "from course_utils import observe as o\no.__dict__['emit'] = print\n",
]

ORDINARY = [
    "import course_utils as cu\ncu.setup(seed=0, device='cpu')\n",
    "from course_utils.checks import check_tensor, check_value\ncheck_tensor(x, y, name='x')\n",
    "import course_utils as cu\nresult = cu.check_value(3, 3)\nobserve = 5\nobserve += 1\n",
    "from course_utils import plots\nfig = plots.loss_curve([1.0, 0.5])\nlosses = {}\nlosses['a'] = 1\n",
    "import torch\nx = torch.ones(3)\nx[0] = 2\nself_check = {'emit': 1}\n",
]


@pytest.mark.parametrize("code", TAMPERING)
def test_code_that_rebinds_or_reaches_the_checking_machinery_is_noted_for_review(code):
    from grader.prepare import integrity

    found = integrity.scan(code)
    assert any("course_utils" in f.reason for f in found), found


@pytest.mark.parametrize("code", ORDINARY)
def test_ordinary_use_of_course_utils_is_never_noted(code):
    from grader.prepare import integrity

    assert integrity.scan(code) == []

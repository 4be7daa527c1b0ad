"""Claims of speed or size are measured or asserted next to them (ci/claim_lint.py), in every chapter."""

from __future__ import annotations

import claim_lint
import nbformat
import pytest

from grader import project


def md(text: str, claims_ok=None):
    cell = nbformat.v4.new_markdown_cell(text)
    if claims_ok is not None:
        cell.metadata["course"] = {"claims_ok": claims_ok}
    return cell


def code(text: str):
    return nbformat.v4.new_code_cell(text)


def lint(*cells) -> list[str]:
    return claim_lint.problems_in_cells(list(cells))


@pytest.mark.parametrize("chapter", project.chapters())
def test_every_chapter_measures_the_speeds_and_sizes_it_claims(chapter):
    assert claim_lint.problems(project.source_notebook(chapter)) == []


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("In place is 3x faster than out of place.", "speed"),
        ("A pinned copy runs at 12 GB/s.", "speed"),
        ("The loop version is orders of magnitude behind.", "speed"),
        ("Loading takes 0.3 ms.", "speed"),
        ("Creating it is instant.", "speed"),
        ("Deterministic kernels come at a speed cost.", "speed"),
        ("bfloat16 halves the memory of the weights.", "size"),
        ("The matrix takes 64 MiB.", "size"),
        ("A view costs no extra memory.", "size"),
        ("A contiguous copy is cheap.", "either"),
    ],
)
def test_an_unmeasured_claim_is_flagged(sentence, kind):
    found = lint(md(f"## A section\n\n{sentence}"), code("x = 1 + 1\nprint(x)"))
    assert len(found) == 1 and f"({kind})" in found[0] and "cell 0" in found[0], found


def test_a_claim_with_no_code_cell_after_it_is_flagged():
    assert lint(code("x = 1"), md("The summary: views are free and fast.")) != []


def test_a_timed_speed_claim_passes():
    timed = code(
        "import time\n"
        "t0 = time.perf_counter()\nslow = sum(range(10**5))\nslow_s = time.perf_counter() - t0\n"
        "t0 = time.perf_counter()\nfast = 10**5 * (10**5 - 1) // 2\nfast_s = time.perf_counter() - t0\n"
        "assert fast == slow and fast_s < slow_s\n"
    )
    assert lint(md("The formula is faster than the loop."), md("(an aside)"), timed) == []


def test_a_benchmark_timer_or_an_earlier_timing_helper_counts_as_a_measurement():
    timer = code("from torch.utils import benchmark\nm = benchmark.Timer('x + 1', globals={'x': 1}).blocked_autorange()")
    assert lint(md("Adding one takes under a second."), timer) == []
    helper = code("import time\n\ndef seconds(fn):\n    t0 = time.perf_counter()\n    fn()\n    return time.perf_counter() - t0")
    uses = code("assert seconds(lambda: None) < seconds(lambda: sum(range(10**6)))")
    assert lint(helper, md("Doing nothing is faster than summing a million numbers."), uses) == []


def test_an_asserted_size_claim_passes_and_a_printed_one_does_not():
    asserted = code("import torch\nX = torch.zeros(1024, 1024)\nassert X.numel() * X.element_size() == 4 * 2**20")
    assert lint(md("A 1024 × 1024 float32 matrix takes 4 MiB."), asserted) == []
    printed = code("import torch\nX = torch.zeros(1024, 1024)\nprint(X.numel() * X.element_size())")
    assert lint(md("A 1024 × 1024 float32 matrix takes 4 MiB."), printed) != []


def test_a_timing_does_not_measure_a_size_claim():
    timed = code("import time\nt0 = time.perf_counter()\nprint(time.perf_counter() - t0)")
    found = lint(md("The copy takes 64 MiB."), timed)
    assert len(found) == 1 and "(size)" in found[0]


def test_a_silenced_claim_with_a_reason_passes():
    cell = md("On GPUs with tensor cores, bfloat16 matmuls are several times faster.",
              claims_ok="a statement about GPU hardware, which CI does not have")
    assert lint(cell, code("x = 1")) == []


@pytest.mark.parametrize("reason", ["", "   ", None, 1, ["why"]])
def test_a_silence_without_a_reason_is_an_error(reason):
    cell = md("It is 10x faster.")
    cell.metadata["course"] = {"claims_ok": reason}
    found = lint(cell, code("x = 1"))
    assert any("must give a reason" in p for p in found), found


def test_a_silence_on_a_cell_that_claims_nothing_is_an_error():
    found = lint(md("Shapes are tuples.", claims_ok="left over"), code("x = 1"))
    assert any("claims no speed or size" in p for p in found), found


@pytest.mark.parametrize(
    "sentence",
    [
        "It rounds halves to the even neighbour.",  # a noun, not a size
        "The gaps are 65,536 times coarser.",  # precision, not speed or size
        "f''(x) = 6x = 18.",  # algebra
        "Scattering 1s at the labels builds one-hot vectors.",
        "Where a tensor is used several times, contributions add.",
        "The `fast` path of `torch.Tensor.half()` uses `2 bytes`.",  # inline code is not prose
        "The whole thing runs many times.",
    ],
)
def test_words_in_another_sense_are_not_claims(sentence):
    assert claim_lint.claims_in(sentence) == []


def test_a_learners_guess_cell_between_a_claim_and_its_measurement_is_skipped():
    timed = code("import time\nt0 = time.perf_counter()\nx = sum(range(10))\nassert time.perf_counter() - t0 < 1")
    guess = code("guess = ...  # your prediction: a number of seconds")
    assert lint(md("Summing ten numbers takes under a second."), guess, timed) == []

"""A prediction the learner commits to is told right or wrong, never graded, and never raises."""

from __future__ import annotations

import pytest
import torch

from course_utils.predict import reveal, same


@pytest.mark.parametrize("blank", [..., None, "", "  "])
def test_a_blank_guess_prints_the_answer_and_raises_nothing(blank, capsys):
    assert reveal(blank, (4, 4)) is None
    assert "No guess yet. The answer: (4, 4)." in capsys.readouterr().out


@pytest.mark.parametrize(
    ("guess", "answer"),
    [((4, 4), torch.Size([4, 4])), ([4, 4], (4, 4)), ("A View", "a view"), (8, torch.tensor(8.0)),
     ("float32", torch.float32), (torch.int64, torch.int64), (True, torch.tensor(True)), (0.1 + 0.2, 0.3),
     ((torch.uint8, 4), (torch.uint8, 4))],
)
def test_a_right_guess_is_told_right_in_any_spelling_of_the_answer(guess, answer, capsys):
    assert same(guess, answer) and reveal(guess, answer) is True
    assert capsys.readouterr().out.startswith("Right:")


@pytest.mark.parametrize(
    ("guess", "answer"),
    [((4,), (4, 4)), ("a copy", "a view"), (4, 8), (True, False), (1, True), ("float16", torch.float32),
     (torch.ones(2), torch.ones(3)), ((4, 4), 16)],
)
def test_a_wrong_guess_is_told_wrong_with_the_answer(guess, answer, capsys):
    assert not same(guess, answer) and reveal(guess, answer) is False
    assert "Not quite: you guessed" in capsys.readouterr().out


def test_a_guess_outside_the_choices_is_told_so(capsys):
    assert reveal("maybe", "an error", choices=["a result", "an error"]) is False
    assert "is not one of the choices 'a result', 'an error'" in capsys.readouterr().out

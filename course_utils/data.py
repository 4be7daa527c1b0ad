"""Small real datasets that ship inside installed packages, loaded as tensors (no downloads)."""

from __future__ import annotations

from typing import NamedTuple

import torch


class Split(NamedTuple):
    """A train/test split of a labelled dataset; unpacks as ``X_train, y_train, X_test, y_test``."""

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor


def load_digits(
    test_fraction: float = 0.25,
    *,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> Split:
    """Load scikit-learn's handwritten digits (1797 images of 8×8 pixels, classes 0–9).

    The data ships inside scikit-learn, so nothing is downloaded. Introduced in chapter 08.

    Args:
        test_fraction: share of the samples held out for testing, strictly between 0 and 1.
        seed: seed of the private ``torch.Generator`` that shuffles the samples before the
            split; the same seed always gives the same split, and the global RNG is untouched.
        device: where the returned tensors live.

    Returns:
        A :class:`Split`. ``X_*`` are float32 of shape ``(N, 64)``: each row is one image,
        flattened row by row, with pixel values scaled from 0..16 to [0, 1]. ``y_*`` are int64
        class indices of shape ``(N,)``, ready for ``nn.CrossEntropyLoss``.

    Raises:
        ValueError: when ``test_fraction`` leaves the train or the test part empty.
    """
    from sklearn.datasets import load_digits as sklearn_load_digits

    bunch = sklearn_load_digits()
    X = torch.as_tensor(bunch.data, dtype=torch.float32) / 16.0  # (1797, 64), values in [0, 1]
    y = torch.as_tensor(bunch.target, dtype=torch.int64)  # (1797,)
    n = len(y)
    n_test = round(test_fraction * n)
    if not 0 < n_test < n:
        raise ValueError(
            f"test_fraction={test_fraction!r} leaves {n_test} of {n} samples for testing;"
            " choose a value strictly between 0 and 1, such as 0.25."
        )
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(n, generator=generator)
    test_idx, train_idx = order[:n_test], order[n_test:]
    return Split(
        X[train_idx].to(device),
        y[train_idx].to(device),
        X[test_idx].to(device),
        y[test_idx].to(device),
    )

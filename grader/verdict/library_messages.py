"""Error messages Python and torch write, as templates: the only error text a reason repeats.

A message the learner's process sent is learner text, whatever class it names (a learner's
``raise RuntimeError("... score 20/20")`` is one). A reason repeats a message only where its
beginning is one of these templates, and then only what the template matched: the template's
own words, with numbers, names and shapes in its slots (each slot a short run of digits,
identifier characters or a shape list). Whatever the message says after that is never shown.
"""

from __future__ import annotations

import re

_N = r"-?\d{1,12}"
_ID = r"[A-Za-z_][\w.]{0,29}"
_SHAPE = r"\[(?:-?\d{1,12}(?:, -?\d{1,12}){0,7})?\]"

TEMPLATES = [re.compile(t) for t in (
    rf"mat1 and mat2 shapes cannot be multiplied \({_N}x{_N} and {_N}x{_N}\)",
    rf"The size of tensor a \({_N}\) must match the size of tensor b \({_N}\) at non-singleton dimension {_N}",
    rf"shape '{_SHAPE}' is invalid for input of size {_N}",
    rf"cannot reshape tensor of 0 elements into shape {_SHAPE}",
    rf"index {_N} is out of bounds for dimension {_N} with size {_N}",
    rf"Dimension out of range \(expected to be in range of \[{_N}, {_N}\], but got {_N}\)",
    rf"Expected all tensors to be on the same device, but found at least two devices, {_ID}(?::\d+)? and {_ID}(?::\d+)?",
    rf"expected scalar type {_ID} but found {_ID}",
    rf"can't convert {_ID}(?::\d+)? device type tensor to numpy",
    r"element 0 of tensors does not require grad and does not have a grad_fn",
    r"a leaf Variable that requires grad is being used in an in-place operation",
    r"Can't call numpy\(\) on Tensor that requires grad",
    rf"unsupported operand type\(s\) for (?:[-+*/%@<>=!&|^]{{1,3}}|divmod\(\)|pow\(\)): '{_ID}' and '{_ID}'",
    rf"'{_ID}' object has no attribute '{_ID}'",
    rf"'{_ID}' object is not (?:callable|subscriptable|iterable)",
    rf"{_ID}\(\) got an unexpected keyword argument '{_ID}'",
    rf"{_ID}\(\) missing {_N} required positional arguments?",
    rf"{_ID}\(\) takes {_N} positional arguments? but {_N} (?:was|were) given",
    r"(?:float )?division by zero",
    r"integer division or modulo by zero",
    r"list index out of range",
    r"tuple index out of range",
    r"view size is not compatible with input tensor's size and stride \(at least one dimension spans across two"
    r" contiguous subspaces\)\. Use \.reshape\(\.\.\.\) instead\.",
    rf"{_ID}\(\): Expected dtype {_ID}(?:/{_ID}){{0,3}} for index",
    rf"Expected size for first two dimensions of batch2 tensor to be: {_SHAPE} but got: {_SHAPE}\.",
    r"At least one stride in the given numpy array is negative, and tensors with negative strides are not currently"
    r" supported\.",
    r"grad can be implicitly created only for scalar outputs",
    r"Trying to backward through the graph a second time",
    r"one of the variables needed for gradient computation has been modified by an inplace operation",
    rf"function {_ID} returned an incorrect number of gradients \(expected {_N}, got {_N}\)",
    r"Expected one of (?:[a-z]{2,15}, ){1,30}[a-z]{2,15} device type at start of device string: [\w:]{1,30}",
    rf"not enough values to unpack \(expected {_N}, got {_N}\)",
    rf"too many values to unpack \(expected {_N}\)",
)]


def library_words(message: str) -> str | None:
    """The beginning of ``message`` that one of :data:`TEMPLATES` matches, or None."""
    first = message.strip().split("\n", 1)[0]
    for template in TEMPLATES:
        m = template.match(first)
        if m:
            return m.group(0)
    return None

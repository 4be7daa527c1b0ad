"""Rules about *how* an answer is written, read in the coordinator from the code the graded function reaches.

Some statements set a rule that no value can show: "no loops", "integer arithmetic only",
"``torch.softmax`` is switched off". Patching torch inside the learner's process enforces
nothing, and a yes/no sent from there can be faked. So the rule is read here, as Python would
run the notebook up to the exercise's test: which definition of the graded function the test
meets is decided by the order of the cells and by Python's own scoping (:mod:`symtable`), with
every binding inside any statement (``if``, ``try``, ``with``, ``for``, a walrus, ``global`` in
a function) a possible definition (:mod:`.bindings`); the code it reaches is read, transitively,
and nothing else: a scratch cell, an exploration, a draft the answer overrides never counts.

A chapter declares its rules in ``solutions/<chapter>/grading.toml``, by answer cell::

    [rules.ex5_softmax]
    forbid = ["softmax", "torch.optim"]   # a family (`softmax`, `_softmax`, `F.softmax`) or a qualified name
    allow = ["arange", "where", "shape"]  # or: only these attributes (a puzzle's primitives)
    no_loops = true                       # for, while, comprehensions, map/filter, recursion
    integer_only = true                   # no /, no float literal, no float()
    why = "softmax must be built from exp, max and sum"

Three outcomes (:func:`violation`): the answer follows the rule; it breaks it (a switched-off
or unlisted function is reached); or it cannot be read -- the reached code looks a function up
by name at run time (``getattr``, ``vars``, ``exec``, ...), sits under a cell magic whose body is
no Python, imports a module of its own, evaluates a type hint that runs code, or reaches a
library's private name. The last two cost the exercise, with the line named (:mod:`.checks`).
"""

from grader.verdict.rules.rule import Read, Rule, bindings, from_settings, read, violation

__all__ = ["Read", "Rule", "bindings", "from_settings", "read", "violation"]

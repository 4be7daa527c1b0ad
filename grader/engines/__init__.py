"""Where a prepared submission runs: in Jupyter kernels (:mod:`.kernel`, the reference engine) or
in children of a warm server (:mod:`.fork`), each confined by :mod:`.isolation`; what every engine
shares is :mod:`.execution`. Engines only execute; they never score (see :mod:`grader.verdict.judge`)."""

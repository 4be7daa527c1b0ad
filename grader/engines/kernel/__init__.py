"""The ``kernel`` engine, the reference: fresh, confined Jupyter kernels per submission."""

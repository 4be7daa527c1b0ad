"""The ``fork`` engine: a warm server per worker, a fresh child forked from it per submission."""

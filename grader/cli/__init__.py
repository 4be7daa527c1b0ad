"""The ``course`` command line: it parses options and forwards to each stage's ``main``."""

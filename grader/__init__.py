"""Instructor-facing tools: release, check, grade, feedback, export (the ``course`` CLI)."""

import sys

# jsonschema (through nbformat) imports the optional ``rfc3987_syntax`` when it is installed,
# which compiles a grammar at import: ~0.8 s of every ``course`` command, for an "iri" string
# format no notebook schema uses. Marked as absent, jsonschema skips that one format checker.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[assignment]

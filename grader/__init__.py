"""Instructor-facing tools: release, check, grade, feedback, export (the ``course`` CLI)."""

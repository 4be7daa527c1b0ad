"""Preparing: the student release, and each submission read, sanitised and given the grader's tests."""

"""Intake: submissions found in folders and LMS zips, the LMS's identities, the course workspace."""

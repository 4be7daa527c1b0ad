"""Pages: the learners' feedback and the class report, as inert HTML."""

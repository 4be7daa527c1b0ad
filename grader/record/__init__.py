"""Recording: scores into the gradebook, the result files, the exports an LMS imports."""

"""The verdict: each test's observations against the solution's, decided in the coordinator."""

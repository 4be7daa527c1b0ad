"""What confines a submission under either engine: the sandbox, its mounts, limits, budgets and watch."""

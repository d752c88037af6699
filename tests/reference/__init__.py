"""Deliberately literal reference implementations, used as oracles by tests and benchmarks."""

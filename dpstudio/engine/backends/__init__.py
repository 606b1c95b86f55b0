"""Execution backends beyond the in-memory engine (optional dependencies, imported lazily)."""

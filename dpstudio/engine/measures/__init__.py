"""Utility and risk measures (docs/measures.md)."""

"""Generalisation hierarchies: ARX files, built hierarchies, taxonomies."""

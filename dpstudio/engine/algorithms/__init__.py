"""Algorithms the methods share: microaggregation, noise, generalisation."""

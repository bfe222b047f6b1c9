"""Benchmarks (``python -m brawlkit bench env|native|train``): each reports ratios
against a reference measured in the same run (docs/benchmarks.md)."""

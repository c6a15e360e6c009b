"""Benchmarks (speed is reported here, never asserted in tests). See BENCHMARKS.md."""

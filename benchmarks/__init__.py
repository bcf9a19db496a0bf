"""Benchmarks: communication timings and the scaling model."""

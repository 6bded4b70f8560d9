"""Helpers for tests, examples and benchmarks (model builder); no TensorFlow needed."""

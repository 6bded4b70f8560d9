"""Ethos-U cascader: a numpy-vectorized cascading scheduler and its TVM lowering flow."""

__version__ = "0.1.0"

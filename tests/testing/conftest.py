"""Fixtures for the TFLite model builder tests: built-once models and the Relax import path."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import tvm

from cascader.frontend.tflite_import import import_tflite
from cascader.testing.networks import CATALOGUE
from cascader.testing.tflite_builder import ModelBuilder


def import_into_relax(flatbuffer: bytes) -> tvm.IRModule:
    """The one place these tests import TFLite into Relax: the project's importer (TVM's
    frontend with cascader's converter extensions)."""
    return import_tflite(flatbuffer)


@dataclass(frozen=True)
class BuiltCase:
    builder: ModelBuilder
    flatbuffer: bytes


@functools.cache
def _build(case: str) -> BuiltCase:
    builder = CATALOGUE[case]()
    return BuiltCase(builder, builder.build())


@pytest.fixture(scope="session")
def built() -> Callable[[str], BuiltCase]:
    """Case name -> its builder and flatbuffer, built once per session."""
    return _build


@pytest.fixture(scope="session")
def relax_import() -> Callable[[bytes], tvm.IRModule]:
    return import_into_relax

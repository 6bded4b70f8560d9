"""The front half's pass list, written once: TFLite bytes -> Relax (QDQ) -> NPU composites
outlined into "ethos-u" functions -> legalized NPU primitive ops, identities removed and
layouts chosen. The model flow, the TVM lowering hook and the model reference all run it."""

from __future__ import annotations

from dataclasses import dataclass

import tvm

from cascader.frontend.legalize import choose_layouts, legalize, remove_identities
from cascader.frontend.partition import host_ops, partition_for_ethosu
from cascader.frontend.tflite_import import import_tflite
from cascader.ir.npu_ops import NpuFunction


@dataclass(frozen=True)
class FrontHalf:
    """A model's NPU functions in model order, and the operators left on the host."""

    functions: tuple[NpuFunction, ...]
    host_ops: tuple[str, ...]


def npu_functions(module: tvm.IRModule) -> list[NpuFunction]:
    """The partitioned module's "ethos-u" functions legalized to NPU primitive ops, with
    identities removed and each tensor's layout chosen."""
    return [choose_layouts(remove_identities(f)) for f in legalize(module)]


def front_half(model: bytes, name: str = "model") -> FrontHalf:
    """Import, partition and legalize a validated TFLite model."""
    module = partition_for_ethosu(import_tflite(model, name))
    return FrontHalf(tuple(npu_functions(module)), tuple(host_ops(module)))


def model_npu_functions(model: bytes) -> list[NpuFunction]:
    """The NPU functions of a TFLite model (see `front_half`)."""
    return list(front_half(model).functions)

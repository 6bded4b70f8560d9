"""The front half's pass list, written once: TFLite bytes -> Relax (QDQ) -> NPU composites
outlined into "ethos-u" functions -> legalized NPU primitive ops, identities removed, swish
folded into one table lookup, layouts chosen. The model flow, the TVM lowering hook and the
model reference all run it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import tvm
from tvm import relax

from cascader.frontend.legalize import (
    choose_layouts,
    ethosu_functions,
    legalize,
    legalize_named,
    remove_identities,
)
from cascader.frontend.partition import host_ops, partition_for_ethosu
from cascader.frontend.swish import fold_swish
from cascader.frontend.tflite_import import import_tflite
from cascader.ir.npu_ops import NpuFunction, Tie
from cascader.ir.origins import TfliteOrigin


@dataclass(frozen=True)
class FrontHalf:
    """A model's NPU functions in model order, the operators left on the host, which
    function inputs are other functions' outputs (`npu_ties`), and the TFLite operator each
    NPU op stands for, by op name (`legalize_named`)."""

    functions: tuple[NpuFunction, ...]
    host_ops: tuple[str, ...]
    ties: tuple[Tie, ...] = ()
    origins: Mapping[str, TfliteOrigin] = field(default_factory=dict)


def npu_functions(module: tvm.IRModule) -> list[NpuFunction]:
    """The partitioned module's "ethos-u" functions legalized to NPU primitive ops, with
    identities removed, swish folded and each tensor's layout chosen."""
    return [_laid_out(f) for f in legalize(module)]


def _laid_out(function: NpuFunction) -> NpuFunction:
    return choose_layouts(fold_swish(remove_identities(function)))


def npu_ties(module: tvm.IRModule) -> tuple[Tie, ...]:
    """Where the partitioned module's main passes one "ethos-u" function's output, as it is,
    to another: both are the same tensor of the model, so they share one buffer."""
    npu = {str(name) for name, _ in ethosu_functions(module)}
    made: dict[relax.Var, tuple[str, int]] = {}
    tuples: dict[relax.Var, str] = {}
    ties: list[Tie] = []
    for block in module["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, relax.Call) and isinstance(value.op, relax.GlobalVar):
                name = value.op.name_hint
                if name not in npu:
                    continue
                ties.extend((name, i, *made[a]) for i, a in enumerate(value.args) if a in made)
                if isinstance(binding.var.ty, relax.TupleType):
                    tuples[binding.var] = name
                else:
                    made[binding.var] = (name, 0)
            elif isinstance(value, relax.TupleGetItem) and value.tuple_value in tuples:
                made[binding.var] = (tuples[value.tuple_value], int(value.index))
    return tuple(ties)


def front_half(model: bytes, name: str = "model") -> FrontHalf:
    """Import, partition and legalize a validated TFLite model."""
    module = partition_for_ethosu(import_tflite(model, name))
    functions, origins = legalize_named(module)
    laid_out = tuple(_laid_out(f) for f in functions)
    return FrontHalf(laid_out, tuple(host_ops(module)), npu_ties(module), origins)


def model_npu_functions(model: bytes) -> list[NpuFunction]:
    """The NPU functions of a TFLite model (see `front_half`)."""
    return list(front_half(model).functions)

"""The lowering hook, as TVM's Ethos-U backend had it: a partitioned Relax module in, its
external "ethos-u" functions lowered to TIR PrimFuncs (`cascader.lowering.lower`: buffers, stripe
loops, extern NPU calls) out, each carrying what codegen compiles from that TIR
(`cascader.lowering.tir_to_npu`): command stream, driver payload, encoded constants, sizes.

`relax_to_tir(mod, target)` takes the module `partition_for_ethosu` makes (composites outlined
into functions with Codegen "ethos-u"), legalizes them to NPU primitive ops (with the LUT,
identity and layout passes of `legalize`), records `device_contexts` (every NPU function runs
on "ethos-u"), and lowers each function with the cascader (which needs exactly one workspace
pool on the module: its size is the SRAM pool) or, with the cascader off, with the
copy-constants scheduler. The I/O of an NPU function lives in the workspace (Vela's arena),
so no memory pressure is subtracted from the pool: the schedule counts those bytes itself.

Workspace pools are a module attribute "workspace_memory_pools": a list of maps with
"pool_name" and "size_hint_bytes", the shape `dse export` writes for TVM.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax, tirx

from cascader.core.options import CascaderOptions
from cascader.ethosu.codegen import Compiled
from cascader.ethosu.defaults import DEFAULT_ACCELERATOR, POINT_OPTIONS, system_defaults
from cascader.ethosu.memory import system_memory
from cascader.ethosu.vela_arch import system_arch
from cascader.frontend.legalize import ethosu_functions
from cascader.frontend.passes import npu_functions
from cascader.ir.errors import ScheduleError
from cascader.lowering.lower import lower
from cascader.lowering.tir_to_npu import compile_tir
from cascader.schedule.network import Network, network
from cascader.schedule.point_scheduler import PointScheduler

__all__ = [
    "EthosuTarget",
    "LoweringError",
    "compile",
    "relax_to_tir",
    "relax_to_tir_func",
    "workspace_pool_bytes",
]

NO_POOL = "Workspace memory pool needs to be provided for the cascader"
MANY_POOLS = "Exactly one workspace pool needs to be provided for the cascader"
POOLS_ATTR = "workspace_memory_pools"


class LoweringError(ValueError):
    """The module or its pools cannot be lowered as asked."""


@dataclass(frozen=True)
class EthosuTarget:
    """Where and how NPU functions are compiled. `options` None turns the cascader off (the
    copy-constants scheduler); system config and memory mode default to the family's."""

    accelerator: str = DEFAULT_ACCELERATOR
    system_config: str | None = None
    memory_mode: str | None = None
    options: CascaderOptions | None = POINT_OPTIONS
    vela_config: str | None = None

    def system(self) -> tuple[str, str]:
        return system_defaults(self.accelerator, self.system_config, self.memory_mode)

    @classmethod
    def from_snippet(cls, snippet: dict) -> EthosuTarget:
        """The target of the `tvm` snippet `dse export` writes (its "target" object)."""
        target = snippet["target"]
        options = target.get("options")
        return cls(
            accelerator=target["accelerator"],
            system_config=target.get("system_config"),
            memory_mode=target.get("memory_mode"),
            options=None if options is None else CascaderOptions.from_json(options),
            vela_config=target.get("vela_config"),
        )


def workspace_pool_bytes(mod: tvm.IRModule) -> int:
    """The size of the module's one workspace pool (the cascader's SRAM)."""
    pools = mod.attrs.get(POOLS_ATTR) if mod.attrs is not None else None
    if not pools:
        raise LoweringError(NO_POOL)
    if len(pools) != 1:
        raise LoweringError(MANY_POOLS)
    size = int(pools[0]["size_hint_bytes"])
    if size <= 0:
        raise LoweringError(f"workspace pool {pools[0]['pool_name']} has no size")
    return size


def _single_function_network(name: str, func: relax.Function, accelerator: str) -> Network:
    functions = npu_functions(tvm.IRModule({name: func}))
    if not functions:
        raise LoweringError(f"{name} is not an external ethos-u function")
    return network(functions, accelerator)


@dataclass(frozen=True)
class _Lowered:
    """An external function lowered to TIR, and what codegen made of that TIR."""

    func: tirx.PrimFunc
    compiled: Compiled
    input_size: int
    output_size: int


def _lower(
    name: str, ext_func: relax.Function, target: EthosuTarget, pool_bytes: int | None
) -> _Lowered:
    """The function's schedule (cascader or copy-constants) lowered to TIR, and the TIR read
    back into Vela API operations and compiled. With the cascader on, `pool_bytes` is the SRAM
    pool; off, the memory mode's own arena cache size serves when it is not given."""
    system_config, memory_mode = target.system()
    if pool_bytes is None:
        if target.options is not None:
            raise LoweringError(NO_POOL)
        pool_bytes = int(
            system_arch(target.accelerator, system_config, memory_mode, None).arena_cache_size
        )
    memory = system_memory(
        target.accelerator, system_config, memory_mode, pool_bytes, target.vela_config
    )
    net = _single_function_network(name, ext_func, target.accelerator)
    try:
        point = PointScheduler(net).schedule_point(memory, target.options)
    except ScheduleError as error:
        raise LoweringError(str(error)) from None
    if not point.fits:
        raise LoweringError(
            f"nothing fits in {pool_bytes} bytes; the smallest schedule needs "
            f"{point.schedule.sram_bytes} bytes"
        )
    try:
        (func,) = lower(point.schedule)
        func = func.with_attr("global_symbol", name)
        compiled = compile_tir([func], net, memory, target.accelerator)
    except ScheduleError as error:
        raise LoweringError(str(error)) from None
    graph = net.graph
    return _Lowered(
        func,
        compiled,
        sum(t.size for t in graph.input_tensors if not t.is_constant),
        sum(t.size for t in graph.output_tensors),
    )


def compile(
    name: str, ext_func: relax.Function, target: EthosuTarget, pool_bytes: int | None = None
) -> tuple[bytes, bytes, int]:
    """The function lowered to TIR and compiled from it: (register command stream, encoded
    constants, scratch size in the workspace pool)."""
    compiled = _lower(name, ext_func, target, pool_bytes).compiled
    (stream,) = compiled.functions
    return stream.command_stream, compiled.constants, compiled.scratch_bytes


def relax_to_tir_func(
    name: str, ext_func: relax.Function, target: EthosuTarget, pool_bytes: int | None = None
) -> tirx.PrimFunc:
    """The lowered PrimFunc of an external function (see `cascader.lowering.lower`) with what
    codegen makes of it as attributes: "ethos-u.constants", "ethos-u.input_size",
    "ethos-u.output_size", plus the command stream, driver payload, scratch and arena sizes."""
    lowered = _lower(name, ext_func, target, pool_bytes)
    compiled = lowered.compiled
    (stream,) = compiled.functions

    def blob(data: bytes) -> tvm.runtime.Tensor:
        return tvm.runtime.tensor(np.frombuffer(data, dtype="uint8").copy())

    return lowered.func.with_attr(
        {
            "ethos-u.constants": blob(compiled.constants),
            "ethos-u.command_stream": blob(stream.command_stream),
            "ethos-u.driver_payload": blob(stream.driver_payload),
            "ethos-u.scratch_size": compiled.scratch_bytes,
            "ethos-u.arena_size": compiled.arena_bytes,
            "ethos-u.input_size": lowered.input_size,
            "ethos-u.output_size": lowered.output_size,
        }
    )


def relax_to_tir(mod: tvm.IRModule, target: EthosuTarget | None = None) -> tvm.IRModule:
    """Every external "ethos-u" function of `mod` lowered to a PrimFunc (see module doc); the
    host's functions are kept as they are."""
    target = target or EthosuTarget()
    pool = workspace_pool_bytes(mod) if target.options is not None else None
    functions = ethosu_functions(mod)
    lowered = {name: relax_to_tir_func(name, func, target, pool) for name, func in functions}
    result = tvm.IRModule(
        {gv: lowered.get(gv.name_hint, func) for gv, func in mod.functions.items()}
    )
    contexts = {name: "ethos-u" for name in lowered}
    attrs = dict(mod.attrs) if mod.attrs is not None else {}
    for key, value in {**attrs, "device_contexts": contexts}.items():
        result = result.with_attr(key, value)
    return result

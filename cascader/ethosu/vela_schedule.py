"""Vela's own schedule of a model as input to our evaluator: compile with Vela's legacy core in
process, convert its high-level command stream to ScheduledOps, and keep Vela's own per-op
estimate of each beside it. Running `perf.evaluate` on the ops and comparing with the estimates
measures the evaluator against the model it wraps, on schedules Vela itself chose."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from ethosu.vela import compiler_driver, model_reader, scheduler
from ethosu.vela.high_level_command_stream import DMA, NpuStripe
from ethosu.vela.high_level_command_to_npu_op import convert_command_to_npu_op
from ethosu.vela.hillclimb_allocation import HillClimbAllocator
from ethosu.vela.nn_graph import Graph, PassPlacement, TensorAllocator
from ethosu.vela.npu_performance import PassCycles, estimate_full_op_performance
from ethosu.vela.operation import Op
from ethosu.vela.tensor import (
    MemArea,
    TensorPurpose,
    TensorSubPurpose,
)

from cascader.ethosu.memory import SystemMemory, system_memory
from cascader.ethosu.perf import ScheduledOp
from cascader.ethosu.perf_query import AREA_NAMES, MEM_AREAS
from cascader.ethosu.vela_arch import system_arch
from cascader.ethosu.vela_baseline import (
    VelaError,
    VelaResult,
    checked_inputs,
    fresh_vela_state,
)

__all__ = ["VelaOpEstimate", "VelaSchedule", "vela_scheduled_ops"]

_ACCESS = {
    "sram": PassCycles.SramAccess,
    "dram": PassCycles.DramAccess,
    "onchip_flash": PassCycles.OnChipFlashAccess,
    "offchip_flash": PassCycles.OffChipFlashAccess,
}
# The vela CLI's defaults (its allocator differs from CompilerOptions' own default).
_CLI_OPTIONS = compiler_driver.CompilerOptions(
    tensor_allocator=TensorAllocator.HillClimb,
    hillclimb_max_iterations=HillClimbAllocator.MAX_ITERATIONS,
)
# Graph-building ops that are not operators; Vela's summary leaves them out of its op counts.
_IR_ONLY = (Op.Const, Op.Placeholder, Op.CustomNpuOp, Op.SubgraphInput)


@dataclass(frozen=True)
class VelaOpEstimate:
    """Vela's own estimate of one scheduled op (`estimate_full_op_performance`, as its summary
    sums them). `cascade` is Vela's cascade id, 0 when the op runs on its own. `dma_credit` is
    the part of `npu_cycles` Vela takes off for a weight copy it never counted: a cascaded
    op's weights are copied whole into a single buffer (`Scheduler.propose_weight_buffering`)
    with `full_weight_transfer_cycles` left 0, yet the estimate still subtracts the part of
    the first copy hidden under the previous op, so the op's NPU cycles fall below its
    compute cycles by that much."""

    name: str
    npu_cycles: float
    access_cycles: dict[str, float]
    total_cycles: float
    macs: int
    cascade: int
    dma_credit: float


@dataclass(frozen=True)
class VelaSchedule:
    """Vela's schedule as our evaluator's input (`ops`, in execution order), Vela's estimate
    of each op (`estimates`, same order), the memory system, and Vela's summary."""

    ops: tuple[ScheduledOp, ...]
    estimates: tuple[VelaOpEstimate, ...]
    memory: SystemMemory
    vela: VelaResult


def vela_scheduled_ops(
    model_path: str | Path,
    accelerator: str,
    system_config: str,
    memory_mode: str,
    arena_cache_size: int | None = None,
    optimise: str = "Performance",
    config_path: str | Path | None = None,
) -> VelaSchedule:
    """Compile `model_path` with Vela's legacy core (as `vela --debug-force-legacy-core`), in
    process and quietly, and return its schedule as ScheduledOps with Vela's per-op estimates.
    The SRAM pool of `memory` is the arena cache size Vela used."""
    model, ini = checked_inputs(model_path, optimise, config_path)
    arch = system_arch(accelerator, system_config, memory_mode, arena_cache_size, ini)
    options = scheduler.SchedulerOptions(
        optimization_strategy=scheduler.OptimizationStrategy[optimise],
        sram_target=arch.arena_cache_size,
        verbose_schedule=False,
    )
    fresh_vela_state()
    with _quiet():
        try:
            reader = model_reader.ModelReaderOptions()
            nng, network_type = model_reader.read_model(str(model), reader)
            compiler_driver.compiler_driver(nng, arch, _CLI_OPTIONS, options, network_type, "")
        except Exception as exc:
            raise VelaError(f"vela (legacy core) failed on {model.name}: {exc}") from exc
    memory = system_memory(accelerator, system_config, memory_mode, arch.arena_cache_size, ini)
    ops: list[ScheduledOp] = []
    estimates: list[VelaOpEstimate] = []
    for sg in nng.subgraphs:
        if sg.placement != PassPlacement.Npu or not sg.sched_ops:
            continue
        stripes: dict[object, list[tuple[NpuStripe, int]]] = {}
        luts: dict[object, DMA] = {}
        copying: dict[object, int] = {}  # weight bytes DMA'd for the op's next stripe
        for cmd in sg.high_level_command_stream:
            primary = cmd.ps.primary_op
            if isinstance(cmd, NpuStripe):
                stripes.setdefault(primary, []).append((cmd, copying.pop(primary, 0)))
            elif isinstance(cmd, DMA) and cmd.out_tensor.purpose == TensorPurpose.LUT:
                luts[primary] = cmd
            elif isinstance(cmd, DMA) and cmd.out_tensor.purpose == TensorPurpose.Weights:
                copied = convert_command_to_npu_op(cmd, arch).src.length
                copying[primary] = copying.get(primary, 0) + copied
        prev = None
        for sched_op in sg.sched_ops:
            cost = sg.schedule.cost_map[sched_op]
            commands = stripes.get(sched_op.parent_op)
            if not commands:
                raise VelaError(f"vela scheduled {sched_op.name} but emitted no stripe for it")
            lut = luts.get(sched_op.parent_op)
            ops.append(_scheduled_op(sched_op.name, commands, lut, cost, arch))
            estimates.append(_estimate(sg.schedule, sched_op, prev, cost, arch))
            prev = sched_op
    result = _result(nng, model.name, accelerator, system_config, memory_mode, optimise,
                     arena_cache_size, arch)  # fmt: skip
    return VelaSchedule(tuple(ops), tuple(estimates), memory, result)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The legacy core prints warnings and progress with print(); keep them off our stdout."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def _area(tensor) -> str | None:
    return None if tensor is None else AREA_NAMES[tensor.mem_area]


def _scheduled_op(
    name: str, commands: list[tuple[NpuStripe, int]], lut: DMA | None, cost, arch
) -> ScheduledOp:
    """One op's stripes as Vela API ops, with the areas its tensors live in. When Vela copies
    the weights by DMA, the stripes read the copy, the encoded tensor is the source, and each
    stripe comes with the weight bytes Vela DMAs just before it (its command stream copies a
    slice right before the slice's first stripe); `lut` is the DMA that loads its lookup table
    (Vela drops it when the table is still in SHRAM)."""
    first = commands[0][0]
    copied = bool(cost.buffered_weight_tensors)
    double = copied and cost.buffered_weight_tensors[0].sub_purpose == TensorSubPurpose.DoubleBuffer
    return ScheduledOp(
        name=name,
        stripes=tuple(convert_command_to_npu_op(cmd, arch) for cmd, _ in commands),
        ifm_area=_area(first.ifm_tensor),
        ofm_area=_area(first.ofm_tensor),
        ifm2_area=_area(first.ifm2_tensor),
        const_area=_area(first.weight_tensor),
        weight_source_area=_area(cost.npu_weights_tensor) if copied else None,
        weight_buffering="double" if double else "single",
        weight_copies=tuple(nbytes for _, nbytes in commands) if copied else (),
        lut_source_area=_area(lut.in_tensor) if lut is not None else None,
        lut_bytes=convert_command_to_npu_op(lut, arch).src.length if lut is not None else 0,
    )


def _estimate(schedule, sched_op, prev, cost, arch) -> VelaOpEstimate:
    _, macs, cycles = estimate_full_op_performance(
        arch, schedule, sched_op, prev, cost.block_config
    )
    credit = 0.0
    buffers = cost.buffered_weight_tensors
    single = buffers and buffers[0].sub_purpose != TensorSubPurpose.DoubleBuffer
    if single and cost.full_weight_transfer_cycles == 0:
        # Without a previous op nothing is hidden: the NPU cycles are the compute alone.
        alone = estimate_full_op_performance(arch, schedule, sched_op, None, cost.block_config)
        credit = float(alone[2][PassCycles.Npu] - cycles[PassCycles.Npu])
    return VelaOpEstimate(
        name=sched_op.name,
        npu_cycles=float(cycles[PassCycles.Npu]),
        access_cycles={area: float(cycles[index]) for area, index in _ACCESS.items()},
        total_cycles=float(cycles[PassCycles.Total]),
        macs=int(macs),
        cascade=int(cost.cascade),
        dma_credit=credit,
    )


def _result(
    nng: Graph,
    model: str,
    accelerator: str,
    system_config: str,
    memory_mode: str,
    optimise: str,
    arena_cache_size: int | None,
    arch,
) -> VelaResult:
    """Vela's summary of the compiled graph, the numbers its CLI reports."""
    used = nng.memory_used
    counts = {placement: 0 for placement in PassPlacement}
    for sg in nng.subgraphs:
        ops = [op for op in sg.get_all_ops_from_passes() if op.type not in _IR_ONLY]
        counts[sg.placement] += len(ops)
    return VelaResult(
        model=model,
        core="legacy-python",
        accelerator=accelerator,
        system_config=system_config,
        memory_mode=memory_mode,
        optimise=optimise,
        arena_cache_size=arena_cache_size,
        cycles_total=float(nng.cycles[PassCycles.Total]),
        cycles_npu=float(nng.cycles[PassCycles.Npu]),
        cycles_access={area: float(nng.cycles[index]) for area, index in _ACCESS.items()},
        inference_time_s=float(nng.cycles[PassCycles.Total] / arch.core_clock),
        sram_used_bytes=int(used.get(MemArea.Sram, 0)),
        dram_used_bytes=int(used.get(MemArea.Dram, 0)),
        offchip_flash_used_bytes=int(used.get(MemArea.OffChipFlash, 0)),
        onchip_flash_used_bytes=int(used.get(MemArea.OnChipFlash, 0)),
        bytes={area: float(np.sum(nng.bandwidths[mem])) for area, mem in MEM_AREAS.items()},
        macs=int(nng.macs),
        encoded_weights_bytes=int(nng.total_npu_encoded_weights),
        npu_ops=counts[PassPlacement.Npu],
        cpu_ops=counts[PassPlacement.Cpu],
    )

"""Vela's PerformanceQuery for one NPU operation (or stripe): the input of every function of
`ethosu.vela.npu_performance` we call, built from an NpuOpDescription."""

from __future__ import annotations

from ethosu.vela.architecture_allocator import ArchitectureBlockConfig
from ethosu.vela.architecture_features import TensorFormat
from ethosu.vela.npu_performance import PerformanceQuery
from ethosu.vela.shape4d import Shape4D
from ethosu.vela.tensor import MemArea

from cascader.ethosu.npu_op import NpuOpDescription

# Memory areas by the names we report them under (as in `dse estimate --json` "bytes").
MEM_AREAS: dict[str, MemArea] = {
    "sram": MemArea.Sram,
    "dram": MemArea.Dram,
    "onchip_flash": MemArea.OnChipFlash,
    "offchip_flash": MemArea.OffChipFlash,
}
AREA_NAMES: dict[MemArea, str] = {v: k for k, v in MEM_AREAS.items()}


def performance_query(
    op: NpuOpDescription,
    config: ArchitectureBlockConfig | None,
    ifm_area: str = "sram",
    ofm_area: str = "sram",
    ifm2_area: str | None = None,
    const_area: str | None = None,
    ifm2_bits: int | None = None,
    ifm2_layout: str | None = None,
) -> PerformanceQuery:
    """A query for `op` run with block `config` (None: set later, as a search over blocks
    does); `const_area` is where the NPU reads its scales and biases (None: the op has none).
    The second input's element size and layout default to the first's; a constant operand
    (e.g. softmax's int32 shifts) often differs."""
    query = PerformanceQuery(op.block_type)
    query.ifm_shape = Shape4D.from_hwc(*op.ifm_shape)
    query.ifm_format = TensorFormat[op.ifm_layout]
    query.ifm_memory_area = MEM_AREAS[ifm_area]
    query.ifm_bits = op.ifm_bits
    if op.ifm2_shape is not None:
        query.ifm2_shape = Shape4D.from_hwc(*op.ifm2_shape)
        query.ifm2_format = TensorFormat[ifm2_layout or op.ifm_layout]
        query.ifm2_memory_area = MEM_AREAS[ifm2_area or ifm_area]
        query.ifm2_bits = ifm2_bits or op.ifm_bits
    query.ofm_shape = Shape4D.from_hwc(*op.ofm_shape)
    query.ofm_format = TensorFormat[op.ofm_layout]
    query.ofm_memory_area = MEM_AREAS[ofm_area]
    query.ofm_bits = NpuOpDescription.dtype_bits(op.ofm_dtype)
    if const_area is not None:
        query.const_shape = Shape4D(1, 1, 1, op.ofm_shape[2])
        query.const_memory_area = MEM_AREAS[const_area]
    query.kernel = op.vela_kernel
    query.config = config
    return query

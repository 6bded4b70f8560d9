"""The explicit stripe schedule: which op computes which box of its output, in what order,
reading which boxes of its inputs, from which buffers at which addresses. Codegen, the integer
reference, the simulator and TIR lowering all read this one form.

Regions follow Vela's base pointers: 0 the constants, 1 the arena (Vela's scratch), 2 the fast
scratch (the SRAM cascade region when the arena lives elsewhere)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from cascader.ir.boxes import Box
from cascader.ir.npu_ops import Layout, NpuFunction, NpuOp, NpuTensor

REGION_CONSTANTS, REGION_ARENA, REGION_FAST = 0, 1, 2


class ScheduledNetwork(Protocol):
    """What a schedule needs of the network it runs (`cascader.schedule.network.Network`):
    the NPU functions, per part its op (inputs in the shapes the graph gives them) and that
    op as its function wrote it (`own_ops`: inputs in the shapes the op reads them), its
    function, the cascader graph (parts with inputs, output, propagators; graph inputs and
    outputs), and each graph tensor's feature map."""

    @property
    def functions(self) -> tuple[NpuFunction, ...]: ...

    @property
    def ops(self) -> tuple[NpuOp, ...]: ...

    @property
    def function_of(self) -> tuple[int, ...]: ...

    @property
    def own_ops(self) -> tuple[NpuOp, ...]: ...

    @property
    def graph(self) -> Any: ...

    @property
    def co_written(self) -> dict[int, int]: ...

    @property
    def aliases(self) -> dict[int, int]: ...

    def feature_map(self, tid: int) -> NpuTensor: ...


class ScheduledMemory(Protocol):
    """What a schedule needs of its memory system (`cascader.ethosu.memory.SystemMemory`):
    the area of each role (constants, io, cascade), the accelerator and the SRAM pool."""

    @property
    def accelerator(self) -> str: ...

    @property
    def sram_bytes(self) -> int: ...

    @property
    def roles(self) -> Mapping[str, str]: ...

    @property
    def constants_area(self) -> str: ...

    @property
    def io_area(self) -> str: ...

    @property
    def cascade_area(self) -> str: ...


@dataclass
class Buffer:
    """Where a tensor (or a window of it) lives. `kind`: "tensor" holds the whole tensor,
    "window" the box last written into it (origin = that box's start), "rolling" the last
    `rows` rows of a height-striped tensor, row r at r mod rows. `frame` is the NHWC shape
    the buffer's strides come from. Live from step `first` to step `last`."""

    index: int
    tensor: int
    kind: str
    area: str
    region: int
    frame: tuple[int, ...]
    layout: Layout
    dtype_bytes: int
    size: int
    first: int
    last: int
    address: int = -1
    rows: int = 0

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "tensor": self.tensor,
            "kind": self.kind,
            "area": self.area,
            "region": self.region,
            "address": self.address,
            "size": self.size,
            "frame": list(self.frame),
            "layout": self.layout.value,
        }


@dataclass(frozen=True)
class Copy:
    """A DMA into a cascade-region buffer: a box of a feature map, or the encoded weights or
    scale-bias of output channels [lo, hi) of a part ("weights" / "scale_bias")."""

    tensor: int
    what: str  # feature_map | weights | scale_bias
    box: Box
    source: int  # buffer index (feature maps) or -1 (constants)
    dest: int  # buffer index
    part: int


@dataclass(frozen=True)
class Stripe:
    """One NPU operation: part `part` computes `ofm` (into buffer `ofm_buffer`, whose current
    origin is `ofm_origin`) from `ifms` (per feature-map input: box, buffer, origin), with the
    stripe's own padding (top, left, bottom, right), block config (h, w, c), and for ops with
    weights the output channel range and where weights/biases are read from."""

    part: int
    plan: int
    ofm: Box
    ofm_buffer: int
    ofm_origin: tuple[int, ...]
    ifms: tuple[tuple[Box, int, tuple[int, ...]], ...]
    padding: tuple[int, int, int, int]
    block: tuple[int, int, int]
    channels: tuple[int, int] | None = None
    weights_buffer: int = -1  # -1: read in place from the constants
    bias_buffer: int = -1


Step = Copy | Stripe


@dataclass
class Schedule:
    """The execution order of copies and stripes, the buffers, and per memory area its
    allocated extent. `scratch_bytes` is the fast (cascade) area's extent. `fallback`: the
    same plans with no weights prebuffered under the plan before, kept when it needs less
    SRAM, for the pools this one does not fit (`fitted`)."""

    network: ScheduledNetwork
    memory: ScheduledMemory
    steps: list[Step]
    buffers: list[Buffer]
    tensor_buffer: dict[int, int]
    extents: dict[str, int] = field(default_factory=dict)
    fallback: Schedule | None = None

    @property
    def sram_bytes(self) -> int:
        return self.extents.get("sram", 0)

    @property
    def scratch_bytes(self) -> int:
        return self.extents.get(self.memory.cascade_area, 0)

    @property
    def arena_bytes(self) -> int:
        return self.extents.get(self.memory.io_area, 0)

    @property
    def least_sram_bytes(self) -> int:
        """The SRAM of this schedule or, when smaller, its fallback's."""
        return min(self.sram_bytes, self.fallback.sram_bytes if self.fallback else self.sram_bytes)

    def fitted(self, pool: int) -> Schedule:
        """This schedule when it fits `pool` bytes of SRAM, else its fallback (which needs
        less) when it has one."""
        if self.fallback is not None and self.sram_bytes > pool:
            return self.fallback
        return self

    def stripes_of(self, part: int) -> list[Stripe]:
        return [s for s in self.steps if isinstance(s, Stripe) and s.part == part]

"""A stripe schedule -> Vela API operations (`ethosu.vela.api`) -> register command stream,
driver payload and the encoded constants, plus the same operations grouped per op as the
performance evaluator's input.

Regions follow Vela's base pointers: 0 the constants (encoded weights, scale-bias, LUTs, pad
fills), 1 the arena (Vela's scratch: feature maps in the memory mode's I/O area), 2 the fast
scratch (the SRAM cascade region when the arena lives elsewhere, as on Ethos-U65 with
Dedicated_Sram). Everything is laid out in first-use order, so equal inputs give equal bytes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from ethosu.vela.api import (
    NpuActivation,
    NpuActivationOp,
    NpuAddressRange,
    NpuBlockOperation,
    NpuBlockTraversal,
    NpuConv2DOperation,
    NpuConvDepthWiseOperation,
    NpuDataType,
    NpuDmaOperation,
    NpuElementWiseOp,
    NpuElementWiseOperation,
    NpuFeatureMap,
    NpuKernel,
    NpuLayout,
    NpuOperation,
    NpuPadding,
    NpuPoolingOp,
    NpuPoolingOperation,
    NpuQuantization,
    NpuResamplingMode,
    NpuRoundingMode,
    NpuShape3D,
    NpuTileBox,
    npu_create_driver_payload,
    npu_generate_register_command_stream,
)
from ethosu.vela.register_command_stream_util import BASE_PTR_INDEX_MEM2MEM

from cascader.ethosu.perf import ScheduledOp
from cascader.ethosu.vela_arch import default_arch, npu_accelerator
from cascader.ethosu.weights import (
    core_bias_streams,
    core_weight_streams,
    is_part_kernel_first,
    laid_out,
)
from cascader.ir.boxes import Box, copy_box, input_boxes
from cascader.ir.errors import ScheduleError
from cascader.ir.layout import BRICK
from cascader.ir.npu_ops import (
    BinaryElementwise,
    Concatenation,
    Conv2D,
    Identity,
    Layout,
    NpuOp,
    NpuTensor,
    Pooling,
    Quant,
    UnaryElementwise,
    feature_inputs,
)
from cascader.ir.schedule import REGION_CONSTANTS, Buffer, Copy, Schedule, Stripe
from cascader.ir.units import align
from cascader.memo import memo_function

__all__ = [
    "Compiled",
    "FunctionStream",
    "generate",
    "scored_ops",
]

_DTYPES = {
    "int8": NpuDataType.INT8,
    "uint8": NpuDataType.UINT8,
    "int16": NpuDataType.INT16,
    "int32": NpuDataType.INT32,
}
_POOL = {"MAX": NpuPoolingOp.MAX, "AVG": NpuPoolingOp.AVERAGE, "SUM": NpuPoolingOp.REDUCE_SUM}
_LAYOUTS = {layout: NpuLayout[layout.value] for layout in Layout}
_UPSCALE = {
    "NONE": NpuResamplingMode.NONE,
    "NEAREST": NpuResamplingMode.NEAREST,
    "ZEROS": NpuResamplingMode.TRANSPOSE,
}
_ROUNDING = {"TFL": NpuRoundingMode.TFL, "HALF_UP": NpuRoundingMode.NATURAL,
             "NATURAL": NpuRoundingMode.NATURAL}  # fmt: skip


# ---- constants -------------------------------------------------------------------------------


def _core_ranges(region: int, address: int, streams: list[bytes]) -> list[NpuAddressRange]:
    """Where each core's stream starts in a laid-out payload at `address`."""
    ranges = []
    for stream in streams:
        ranges.append(NpuAddressRange(region, address, align(len(stream))))
        address += align(len(stream))
    return ranges


class _ConstantPool:
    """The constants blob: each distinct piece once, 16-byte aligned and padded (the NPU reads
    and copies whole 16-byte units), in first-use order."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.ranges: dict[object, tuple[int, int]] = {}  # key -> (offset, aligned length)

    def add(self, key: object, payload: bytes) -> NpuAddressRange:
        found = self.ranges.get(key)
        if found is None:
            found = self.ranges[key] = (len(self.data), align(len(payload)))
            self.data += payload + bytes(found[1] - len(payload))
        return NpuAddressRange(REGION_CONSTANTS, *found)

    def find(self, key: object) -> NpuAddressRange | None:
        """The range of a piece already added, or None (so callers build a payload once)."""
        found = self.ranges.get(key)
        return None if found is None else NpuAddressRange(REGION_CONSTANTS, *found)


# ---- feature maps ----------------------------------------------------------------------------


@memo_function(4096)
def _strides(frame: tuple[int, ...], layout: Layout, elem: int) -> NpuShape3D:
    _, _, w, c = frame
    if layout == Layout.NHCWB16:
        x = BRICK * elem
        return NpuShape3D(height=w * math.ceil(c / BRICK) * BRICK * elem, width=x, depth=x * w)
    return NpuShape3D(height=w * c * elem, width=c * elem, depth=elem)


def _offset(y: int, x: int, c: int, strides: NpuShape3D, layout: Layout, elem: int) -> int:
    if layout == Layout.NHCWB16:
        brick, lane = divmod(c, BRICK)
        return y * strides.height + x * strides.width + brick * strides.depth + lane * elem
    return y * strides.height + x * strides.width + c * elem


@memo_function(4096)
def _quant(q: Quant) -> NpuQuantization:
    scale = None if not q.scale or math.isnan(q.scale) else float(q.scale)
    return NpuQuantization(scale_f32=scale, zero_point=int(q.zero_point))


def _feature_map(
    tensor: NpuTensor,
    box: Box,
    buf: Buffer,
    origin: tuple[int, ...],
    steps: tuple[int, ...] = (1, 1, 1, 1),
) -> NpuFeatureMap:
    """`box` of `tensor` as the NPU addresses it in `buf` (whose window starts at `origin`);
    a rolling buffer's wrap becomes a second tile. Called for every operand of every stripe,
    so it indexes instead of zipping and shares the (immutable) unit-step strides."""
    fm = NpuFeatureMap()
    fm.data_type = _DTYPES[tensor.dtype]
    fm.region = buf.region
    layout = buf.layout
    fm.layout = _LAYOUTS[layout]
    fm.quantization = _quant(tensor.quant)
    _, h, w, c = box.shape
    fm.shape = NpuShape3D(h, w, c)
    elem = buf.dtype_bytes
    base = _strides(buf.frame, layout, elem)
    start = box.start
    x0, c0 = start[2] - origin[2], start[3] - origin[3]
    rolling = buf.kind == "rolling"
    y0 = start[1] % buf.rows if rolling else start[1] - origin[1]
    address = buf.address + _offset(y0, x0, c0, base, layout, elem)
    if rolling and y0 + h > buf.rows:
        first = buf.rows - y0
        wrapped = buf.address + _offset(0, x0, c0, base, layout, elem)
        fm.tiles = NpuTileBox(first, first, w, [address, 0, wrapped, 0])
    else:
        fm.tiles = NpuTileBox(h, h, w, [address, 0, 0, 0])
    if steps[3] != 1:
        raise ScheduleError("the NPU cannot step over channels when reading a feature map")
    if steps[1] == steps[2] == 1:
        fm.strides = base
    else:
        fm.strides = NpuShape3D(base.height * steps[1], base.width * steps[2], base.depth)
    return fm


def _line_starts(box: Box, buf: Buffer, origin: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """The address of each contiguous line of `box` in `buf`, in row-major order, and the
    lines' length: a run of channels (NHWC) or a brick row (NHCWB16)."""
    elem = buf.dtype_bytes
    strides = _strides(buf.frame, buf.layout, elem)
    y0, x0, c0 = (box.start[a] - origin[a] for a in (1, 2, 3))
    _, h, w, c = box.shape
    rows = buf.address + np.arange(y0, y0 + h, dtype=np.int64) * strides.height
    if buf.layout == Layout.NHCWB16:
        bricks = np.arange(c0 // BRICK, math.ceil((c0 + c) / BRICK), dtype=np.int64)
        inner, length = x0 * strides.width + bricks * strides.depth, w * BRICK * elem
    else:
        columns = np.arange(x0, x0 + w, dtype=np.int64)
        inner, length = columns * strides.width + c0 * elem, c * elem
    return (rows[:, None] + inner[None, :]).ravel(), length


def _copy_runs(
    box: Box, src: Buffer, src_origin: tuple[int, ...], dst: Buffer, dst_origin: tuple[int, ...]
) -> list[tuple[int, int, int]]:
    """(source, destination, bytes) DMA runs copying `box` between two buffers: line by line
    (source line lengths), a run going on while both sides stay contiguous."""
    source, length = _line_starts(box, src, src_origin)
    dest, _ = _line_starts(box, dst, dst_origin)
    if len(source) != len(dest):
        raise ValueError(f"{len(source)} source lines cannot be copied to {len(dest)} lines")
    if not len(source):
        return []
    ends = np.flatnonzero((source[1:] != source[:-1] + length) | (dest[1:] != dest[:-1] + length))
    starts = np.concatenate(([0], ends + 1))
    counts = np.diff(np.append(starts, len(source)))
    return list(
        zip(source[starts].tolist(), dest[starts].tolist(), (counts * length).tolist(), strict=True)
    )


# ---- operations ------------------------------------------------------------------------------


def _activation(op: NpuOp, ofm: NpuTensor, lut_index: int) -> NpuActivation | None:
    act = getattr(op, "activation", None)
    if act is None or act.kind == "NONE":
        return None
    if act.kind == "LUT":
        activation = NpuActivation(NpuActivationOp.TABLE_LOOKUP)
        activation.lookup_table_index = lut_index
        return activation
    if ofm.dtype == "int32":  # 32-bit results are written whole, as the reference writes them
        return None
    activation = NpuActivation(NpuActivationOp.NONE_OR_RELU)
    q = _quant(ofm.quant)
    scale = q.scale_f32 or 1.0
    activation.min = (act.clamp_min - q.zero_point) * scale
    activation.max = (act.clamp_max - q.zero_point) * scale
    return activation


def _input(tensor: NpuTensor, fm: NpuFeatureMap) -> NpuFeatureMap:
    """An input feature map with the quantisation the NPU reads it with (`_read_quant`)."""
    fm.quantization = _read_quant(tensor)
    return fm


def _stored_average(npu: NpuPoolingOperation) -> None:
    """An average pool averages the stored values, zero points 0, as Vela runs them
    (`use_zero_point_0`) and as TFLite's AVERAGE_POOL_2D and the reference do; its OFM scale
    is 1/N times the ratio of the scales, so scales the flow left unknown (an average of a
    graph input keeps its scale) are taken equal, or the NPU would sum instead of average."""
    ifm, ofm = npu.ifm.quantization, npu.ofm.quantization
    unknown = ifm.scale_f32 is None or ofm.scale_f32 is None
    npu.ifm.quantization = NpuQuantization(
        scale_f32=1.0 if unknown else ifm.scale_f32, zero_point=0
    )
    npu.ofm.quantization = NpuQuantization(
        scale_f32=1.0 if unknown else ofm.scale_f32, zero_point=0
    )


def _fits_register(tensor: NpuTensor, value: int) -> bool:
    """Whether a constant fits the 16-bit IFM2 scalar register (and converts exactly)."""
    info = np.iinfo(tensor.dtype)
    return max(info.min, -(1 << 15)) <= value <= min(info.max, (1 << 15) - 1)


def _read_quant(tensor: NpuTensor) -> NpuQuantization:
    """The quantisation the NPU reads a tensor with: a 32-bit one with zero point 0, as Vela
    programs them (`use_zero_point_0`) and the reference reads them."""
    if tensor.dtype == "int32":
        return _quant(Quant(tensor.quant.scale, 0))
    return _quant(tensor.quant)


def _scalar_map(tensor: NpuTensor) -> NpuFeatureMap:
    fm = NpuFeatureMap()
    fm.data_type = _DTYPES[tensor.dtype]
    fm.quantization = _read_quant(tensor)
    fm.shape = NpuShape3D(1, 1, 1)
    fm.layout = NpuLayout.NHWC
    return fm


def _scalar_value(tensor: NpuTensor, value: int) -> float:
    """The real value whose quantisation in `tensor`'s parameters is the integer `value`."""
    q = _read_quant(tensor)
    return float((value - q.zero_point) * (q.scale_f32 or 1.0))


def _kernel(op: Conv2D | Pooling) -> NpuKernel:
    k = op.kernel
    return NpuKernel(k.width, k.height, k.stride_w, k.stride_h, k.dilation_w, k.dilation_h)


@dataclass
class FunctionStream:
    """One NPU function's operations and what Vela makes of them."""

    name: str
    operations: list[NpuOperation]
    command_stream: bytes = b""
    driver_payload: bytes = b""

    @property
    def dma_copies(self) -> int:
        """The DMA copies among its operations."""
        return sum(isinstance(op, NpuDmaOperation) for op in self.operations)

    @property
    def stripes(self) -> int:
        """Its NPU operations but the copies: one per stripe of the schedule."""
        return len(self.operations) - self.dma_copies


@dataclass
class Compiled:
    """Per NPU function its command stream and driver payload; the shared constants blob; the
    arena and fast-scratch sizes; and per op the scheduled stripes for the evaluator."""

    functions: list[FunctionStream]
    constants: bytes
    arena_bytes: int
    scratch_bytes: int
    scheduled_ops: list[ScheduledOp] = field(default_factory=list)


def _share_key(stripe: Stripe, lut_index: int) -> tuple:
    """What a stripe's operation depends on besides its addresses, when its op reads its
    inputs in the shapes they were made in (see `_Emitter.reshaped`)."""
    ifms = tuple((box.shape, index) for box, index, _ in stripe.ifms)
    return (stripe.part, lut_index, stripe.ofm_buffer, stripe.ofm.shape, ifms, stripe.padding,
            stripe.block, stripe.channels, stripe.weights_buffer, stripe.bias_buffer)  # fmt: skip


class _Emitter:
    """Emits a schedule's operations. With `share`, equal stripes of a part (the same
    shapes, buffers, channels and block) get one operation: the evaluator's input, for
    which a part's many interior stripes are the same operation at other addresses."""

    def __init__(self, schedule: Schedule, accelerator: str, share: bool = False) -> None:
        self.schedule = schedule
        self.accelerator = accelerator
        self.pool = _ConstantPool()
        self.buffers = schedule.buffers
        self.memory = schedule.memory
        self.area_of_region = {b.region: b.area for b in schedule.buffers}
        self.arch = default_arch(accelerator)
        self.lut_slots: dict[bytes, int] = {}
        self.blocks = {s.part: s.block for s in schedule.steps if isinstance(s, Stripe)}
        self.filled: set[int] = set()
        self.encoded: dict[tuple[str, int, int, int], list[bytes]] = {}
        self.ranges: dict[tuple[str, int, int, int, int], list[NpuAddressRange]] = {}
        self._fixed: dict[int, tuple] = {}
        self.shared: dict[tuple, NpuBlockOperation | None] | None = {} if share else None
        self.reshaped = False  # set when a stripe's operation depends on more than its key

    def area(self, region: int) -> str:
        if region == REGION_CONSTANTS:
            return self.memory.constants_area
        return self.area_of_region[region]

    def copy_ops(self, copy: Copy) -> list[NpuOperation]:
        net = self.schedule.network
        dest = self.buffers[copy.dest]
        if copy.what == "feature_map":
            src = self.viewed_source(copy)
            runs = _copy_runs(copy.box, src, (0, 0, 0, 0), dest, copy.box.start)
            return [
                NpuDmaOperation(
                    NpuAddressRange(src.region, s, n), NpuAddressRange(dest.region, d, n)
                )
                for s, d, n in runs
            ]
        op = net.ops[copy.part]
        lo, hi = copy.box.start[0], copy.box.end[0]
        source = self.constant_range(op, copy.part, copy.what, lo, hi)
        length = align(source.length)
        return [
            NpuDmaOperation(
                NpuAddressRange(REGION_CONSTANTS, source.address, length),
                NpuAddressRange(dest.region, dest.address, length),
            )
        ]

    def viewed_source(self, copy: Copy) -> Buffer:
        """The whole-tensor buffer a feature-map copy reads, framed in the shape its box is
        given in (the reading op's): a tensor made in another shape (softmax's input, made
        as its channel max reads it) holds the same row-major NHWC bytes."""
        src = self.buffers[copy.source]
        part = self.schedule.network.graph.parts[copy.part]
        op = self.schedule.network.ops[copy.part]
        slot = next(i for i, t in enumerate(part.inputs) if t.id == copy.tensor)
        shape = tuple(feature_inputs(op)[slot].shape)
        if tuple(src.frame) == shape:
            return src
        if (
            src.kind != "tensor"
            or src.layout != Layout.NHWC
            or math.prod(shape) != math.prod(src.frame)
        ):
            raise ScheduleError(
                f"{op.name} copies tensor {copy.tensor} as {shape} from a {src.kind} "
                f"{src.layout.value} buffer framed {src.frame}"
            )
        return replace(src, frame=shape)

    def constant_range(self, op: Conv2D, part: int, what: str, lo: int, hi: int):
        key = (what, part, lo, hi)
        found = self.pool.find(key)
        if found is None:
            found = self.pool.add(key, laid_out(self.streams(op, part, what, lo, hi)))
        return found

    def streams(self, op: Conv2D, part: int, what: str, lo: int, hi: int) -> list[bytes]:
        """The per-core streams of a part's weights or scale-bias for channels [lo, hi),
        made once per schedule (a part's stripes mostly share their channels)."""
        key = (what, part, lo, hi)
        found = self.encoded.get(key)
        if found is None:
            encode = core_weight_streams if what == "weights" else core_bias_streams
            found = self.encoded[key] = encode(self.accelerator, op, lo, hi, self.block_depth(part))
        return found

    def core_ranges(
        self, op: Conv2D, stripe: Stripe, what: str, buffer: int
    ) -> list[NpuAddressRange]:
        """One address range per active core, read from the copy in `buffer` when there is
        one, else from the constants. Worked out once per schedule for each part, channel
        range and buffer (a part's stripes mostly share them); each stripe gets its own list
        of the (immutable) ranges."""
        lo, hi = stripe.channels
        key = (what, stripe.part, lo, hi, buffer)
        found = self.ranges.get(key)
        if found is None:
            streams = self.streams(op, stripe.part, what, lo, hi)
            whole = self.constant_range(op, stripe.part, what, lo, hi)
            if buffer < 0:
                found = _core_ranges(whole.region, whole.address, streams)
            else:
                buf = self.buffers[buffer]
                if whole.length > buf.size:
                    raise ScheduleError(
                        f"{op.name}: {what} of channels [{lo}, {hi}) take {whole.length} bytes, "
                        f"buffer {buffer} holds {buf.size}"
                    )
                found = _core_ranges(buf.region, buf.address, streams)
            self.ranges[key] = found
        return list(found)

    def block_depth(self, part: int) -> int:
        """The OFM block depth of the part's stripes, which its weight encoding depends on."""
        return self.blocks[part][2]

    def stripe_ops(self, stripe: Stripe) -> list[NpuOperation]:
        net = self.schedule.network
        op = net.ops[stripe.part]
        before: list[NpuOperation] = []
        lut_index = 0
        act = getattr(op, "activation", None)
        if act is not None and act.kind == "LUT":
            lut_index, dma = self.lut(act)
            before += dma
        if isinstance(op, Identity) and op.ifm.shape != op.ofm.shape:
            return before + self.block_copy(op, stripe, stripe.ifms[0])
        if isinstance(op, Concatenation):  # each input's rows into its slice, but those
            return [  # that their producers wrote there
                npu
                for slot, (copy, ifm) in enumerate(zip(op.copies, stripe.ifms, strict=True))
                if slot not in op.in_place
                for npu in self.block_copy(copy, stripe, ifm)
            ]
        if self.shared is None:
            return [*before, self.block_op(op, stripe, lut_index)]
        key = _share_key(stripe, lut_index)
        npu = self.shared.get(key)
        if npu is None:
            self.reshaped = False
            npu = self.block_op(op, stripe, lut_index)
            if key not in self.shared:
                self.shared[key] = None if self.reshaped else npu
        return [*before, npu]

    def block_op(self, op: NpuOp, stripe: Stripe, lut_index: int) -> NpuBlockOperation:
        """The stripe's operation (not a block copy), its LUT in slot `lut_index`."""
        out = self.buffers[stripe.ofm_buffer]
        ofm_box = stripe.ofm
        act = getattr(op, "activation", None)
        npu: NpuBlockOperation
        if isinstance(op, Conv2D):
            npu = NpuConvDepthWiseOperation() if op.kind == "depthwise_conv2d" else (
                NpuConv2DOperation())  # fmt: skip
            kernel, traversal, _ = self.fixed(stripe.part, op)
            if isinstance(npu, NpuConv2DOperation):
                npu.block_traversal = traversal
            npu.kernel = kernel
            npu.weights = self.core_ranges(op, stripe, "weights", stripe.weights_buffer)
            npu.biases = self.core_ranges(op, stripe, "scale_bias", stripe.bias_buffer)
            npu.ifm_upscale = _UPSCALE[op.upscale]
        elif isinstance(op, Pooling):
            npu = NpuPoolingOperation(_POOL[op.pool_type])
            npu.kernel = self.fixed(stripe.part, op)[0]
            npu.rounding_mode = _ROUNDING[op.rounding]
            npu.ifm_upscale = _UPSCALE[op.upscale]
        elif isinstance(op, BinaryElementwise):
            npu = NpuElementWiseOperation(NpuElementWiseOp[op.operator])
            npu.rounding_mode = _ROUNDING[op.rounding]
            if op.rescale is not None:
                npu.rescale = (int(op.rescale[0]), int(op.rescale[1]))
        elif isinstance(op, UnaryElementwise) and op.operator == "CLZ":
            npu = NpuElementWiseOperation(NpuElementWiseOp.CLZ)
        else:  # a table lookup or a requantizing copy: a 1x1 average pool, as Vela runs them
            npu = NpuPoolingOperation(NpuPoolingOp.AVERAGE)
            npu.kernel = NpuKernel(1, 1)
        if isinstance(op, BinaryElementwise):
            self.operands(npu, op, stripe)
        else:
            npu.ifm = self.operand_map(stripe, 0)
        npu.ofm = _feature_map(op.ofm, ofm_box, out, stripe.ofm_origin)
        if op.ofm.dtype == "int32" and (act is None or act.kind != "LUT"):
            npu.ofm.quantization = _read_quant(op.ofm)  # written without a zero point
        if isinstance(op, Pooling) and op.pool_type == "AVG":
            _stored_average(npu)
        if isinstance(op, UnaryElementwise) and op.operator == "LUT":
            npu.ofm.quantization = npu.ifm.quantization  # the table maps the raw input value
        top, left, bottom, right = self.padding(stripe)
        if not isinstance(npu, NpuElementWiseOperation):
            npu.padding = NpuPadding(top=top, left=left, bottom=bottom, right=right)
        # A table lookup in another slot than the first gets its own activation.
        npu.activation = (
            self.fixed(stripe.part, op)[2] if lut_index == 0 else _activation(op, op.ofm, lut_index)
        )
        npu.block_config = NpuShape3D(*stripe.block)
        npu.name = op.name
        return npu

    def fixed(self, part: int, op: NpuOp) -> tuple:
        """What every stripe of a part shares, worked out once per schedule: (kernel, a
        convolution's block traversal, activation with a lookup table in slot 0). Vela reads
        these objects and never writes them, so stripes share them."""
        found = self._fixed.get(part)
        if found is None:
            kernel = _kernel(op) if isinstance(op, Conv2D | Pooling) else None
            traversal = None
            if isinstance(op, Conv2D) and op.kind != "depthwise_conv2d":
                traversal = (
                    NpuBlockTraversal.PART_KERNEL_FIRST
                    if is_part_kernel_first(op)
                    else NpuBlockTraversal.DEPTH_FIRST
                )
            found = self._fixed[part] = (kernel, traversal, _activation(op, op.ofm, 0))
        return found

    def operands(self, npu: NpuElementWiseOperation, op: BinaryElementwise, stripe: Stripe) -> None:
        """IFM and IFM2 of a binary op. A constant operand becomes the IFM2 scalar register
        when it fits its 16 bits, else a 1x1x1 tensor in the constants region; the operands
        swap when the first is the scalar or the broadcast one."""
        first = None if op.ifm_scalar is not None else self.operand_map(stripe, 0)
        second = None if op.ifm2_scalar is not None else self.operand_map(stripe, 1)
        if first is None and second is not None and _fits_register(op.ifm, op.ifm_scalar):
            npu.reversed_operands = True
            npu.ifm, npu.ifm2 = second, _scalar_map(op.ifm)
            npu.ifm2_scalar = _scalar_value(op.ifm, op.ifm_scalar)
            return
        npu.ifm = first or self.constant_map(op.ifm, op.ifm_scalar)
        if second is None and _fits_register(op.ifm2, op.ifm2_scalar):
            npu.ifm2 = _scalar_map(op.ifm2)
            npu.ifm2_scalar = _scalar_value(op.ifm2, op.ifm2_scalar)
            return
        npu.ifm2 = second or self.constant_map(op.ifm2, op.ifm2_scalar)
        if any(a < b for a, b in zip(npu.ifm.shape, npu.ifm2.shape, strict=True)):
            npu.ifm, npu.ifm2 = npu.ifm2, npu.ifm  # the NPU broadcasts only IFM2
            npu.reversed_operands = True

    def padding(self, stripe: Stripe) -> tuple[int, int, int, int]:
        """The stripe's padding; for an op that reads its IFM under its own shape (see
        `operand_map`), the padding of its window over that shape."""
        net = self.schedule.network
        own = net.own_ops[stripe.part]
        if own.ifm.shape == net.ops[stripe.part].ifm.shape:
            return stripe.padding
        self.reshaped = True
        _, padding = input_boxes(own, stripe.ofm)
        return padding

    def operand_map(self, stripe: Stripe, slot: int) -> NpuFeatureMap:
        """Feature-map input `slot` of a stripe as the NPU reads it. An op may read a tensor
        under another shape than the one its buffer was made in (softmax's SUB reads the
        (1, H*W, 1, 1) maxima as (1, H, W, 1) and its input, made as the channel max reads
        it, (1, H*W, C, 1), as (1, H, W, C); a fully connected layer reads a 4-D input as
        one row): it reads the same row-major NHWC bytes, addressed in its own shape."""
        net = self.schedule.network
        box, index, origin = stripe.ifms[slot]
        tensor = feature_inputs(net.ops[stripe.part])[slot]
        own = net.own_ops[stripe.part]
        view = feature_inputs(own)[slot]
        buf = self.buffers[index]
        whole = buf.kind == "tensor"
        if view.shape == tensor.shape and (not whole or tuple(buf.frame) == tuple(view.shape)):
            return _input(tensor, _feature_map(tensor, box, buf, origin))
        if not whole or buf.layout != Layout.NHWC:
            raise ScheduleError(
                f"{own.name} reads {tensor.name} as {view.shape} from a {buf.kind} "
                f"{buf.layout.value} buffer; only a whole NHWC tensor reads under another shape"
            )
        self.reshaped = True
        boxes, _ = input_boxes(own, stripe.ofm)
        viewed = _feature_map(view, boxes[slot], replace(buf, frame=view.shape), (0, 0, 0, 0))
        return _input(tensor, viewed)

    def constant_map(self, tensor: NpuTensor, value: int) -> NpuFeatureMap:
        data = np.array([value], dtype=np.dtype(tensor.dtype).newbyteorder("<")).tobytes()
        where = self.pool.add(("scalar", tensor.dtype, value), data)
        fm = _scalar_map(tensor)
        fm.region = REGION_CONSTANTS
        fm.tiles = NpuTileBox(1, 1, 1, [where.address, 0, 0, 0])
        return fm

    def block_copy(
        self, op: Identity, stripe: Stripe, ifm: tuple[Box, int, tuple[int, ...]]
    ) -> list[NpuOperation]:
        """Concatenate/split/slice/pad: a 1x1 average pool copying the block from `ifm` (box,
        buffer, origin), after filling a pad's output with its fill value (one DMA of
        prepared fill bytes)."""
        ops: list[NpuOperation] = []
        out = self.buffers[stripe.ofm_buffer]
        if op.ofm_fill is not None and (out.kind != "tensor" or out.index not in self.filled):
            self.filled.add(out.index)
            fill = np.full(out.size, op.ofm_fill, dtype=np.int8).tobytes()
            source = self.pool.add(("fill", out.size, op.ofm_fill), fill)
            ops.append(
                NpuDmaOperation(
                    NpuAddressRange(REGION_CONSTANTS, source.address, out.size),
                    NpuAddressRange(out.region, out.address, out.size),
                )
            )
        inside = copy_box(op, stripe.ofm)
        if inside is None:
            return ops
        ifm_box, written = inside
        _, ifm_buf, ifm_origin = ifm
        npu = NpuPoolingOperation(NpuPoolingOp.AVERAGE)
        npu.kernel = NpuKernel(1, 1)
        steps = op.ifm_strides or (1, 1, 1, 1)
        shaped = Box(ifm_box.start, written.shape)
        npu.ifm = _feature_map(op.ifm, shaped, self.buffers[ifm_buf], ifm_origin, steps)
        npu.ofm = _feature_map(op.ofm, written, out, stripe.ofm_origin)
        npu.padding = NpuPadding(0, 0, 0, 0)
        npu.block_config = NpuShape3D(*stripe.block)
        npu.name = op.name
        ops.append(npu)
        return ops

    def lut(self, act) -> tuple[int, list[NpuOperation]]:
        """The SHRAM slot of a lookup table, and the DMA loading it when it is not there yet
        (slots are kept for the whole stream: tables never exceed the reserved LUT banks)."""
        dtype = np.int32 if act.lut_dtype == "int32" else np.int8
        table = np.asarray(act.lut, dtype=dtype).tobytes()
        slot_bytes = self.arch.shram_lut_slot_size
        slots = len(table) // slot_bytes
        if table in self.lut_slots:
            return self.lut_slots[table], []
        used = sum(max(len(t) // slot_bytes, 1) for t in self.lut_slots)
        total = self.arch.shram_lut_size // slot_bytes
        if used + slots > total:
            self.lut_slots.clear()
            used = 0
        index = used
        self.lut_slots[table] = index
        source = self.pool.add(("lut", table), table)
        dest = NpuAddressRange(
            BASE_PTR_INDEX_MEM2MEM, self.arch.shram_lut_address + index * slot_bytes, len(table)
        )
        return index, [NpuDmaOperation(source, dest)]


def generate(schedule: Schedule, accelerator: str, command_streams: bool = True) -> Compiled:
    """Vela API operations for every step of `schedule`, per NPU function; with
    `command_streams` also each function's register command stream and driver payload."""
    emitter = _Emitter(schedule, accelerator)
    functions, scheduled = _emit(emitter)
    target = npu_accelerator(accelerator)
    if command_streams:
        for stream in functions:
            words = npu_generate_register_command_stream(stream.operations, target)
            stream.command_stream = np.asarray(words, dtype="<u4").tobytes()
            stream.driver_payload = bytes(npu_create_driver_payload(words, target))
    return Compiled(
        functions,
        bytes(emitter.pool.data),
        schedule.arena_bytes,
        schedule.scratch_bytes,
        scheduled,
    )


def scored_ops(schedule: Schedule, accelerator: str) -> list[ScheduledOp]:
    """The evaluator's input alone, as `generate` gives it, but equal stripes of a part
    share one operation (whose addresses are the first's): a point's score is most of its
    time, and most of a part's stripes are equal."""
    return _emit(_Emitter(schedule, accelerator, share=True))[1]


@dataclass
class _PartOps:
    """What one part's stripes emitted, gathered for its `ScheduledOp`: its first stripe, its
    block operations with the constant bytes copied in just before each, the lookup-table
    bytes it copied, the weight buffers it used (two: double buffering), and whether its
    first constant copy runs beside an earlier stripe (`schedule.prebuffering`)."""

    first: Stripe
    stripes: list[NpuBlockOperation] = field(default_factory=list)
    copies: list[tuple[int, ...]] = field(default_factory=list)
    lut_bytes: int = 0
    buffers: set[int] = field(default_factory=set)
    first_copy_hidden: bool | None = None


def _emit(emitter: _Emitter) -> tuple[list[FunctionStream], list[ScheduledOp]]:
    """Per NPU function its operations, and per op the scheduled stripes for the evaluator."""
    schedule = emitter.schedule
    net = schedule.network
    streams: dict[int, FunctionStream] = {}
    per_part: dict[int, _PartOps] = {}
    order: list[int] = []
    # (part, buffer) -> the bytes of each DMA copying constants into it
    pending: dict[tuple[int, int], tuple[int, ...]] = {}
    # A constant copy can run beside the stripe before it only when its buffer is live
    # there, so the allocator kept it off that stripe's bytes.
    beside: dict[tuple[int, int], bool] = {}
    last_stripe = -1
    fm_copies: dict[int, list[tuple[str, str, int]]] = {}  # part -> its feature-map copies
    for index, step in enumerate(schedule.steps):
        function = net.function_of[step.part]
        stream = streams.get(function)
        if stream is None:
            stream = streams[function] = FunctionStream(net.functions[function].name, [])
        if isinstance(step, Copy):
            dmas = emitter.copy_ops(step)
            stream.operations += dmas
            if step.what == "feature_map":  # each DMA pays its own latency
                areas = (emitter.area(dmas[0].src.region), emitter.area(dmas[0].dest.region))
                fm_copies.setdefault(step.part, []).extend((*areas, d.src.length) for d in dmas)
            else:
                pending[step.part, step.dest] = tuple(dma.src.length for dma in dmas)
                beside[step.part, step.dest] = emitter.buffers[step.dest].first <= last_stripe
            continue
        ops = emitter.stripe_ops(step)
        if not ops and isinstance(net.ops[step.part], Concatenation):
            continue  # every input was written in place: nothing moves
        stream.operations += ops
        emitted = per_part.get(step.part)
        if emitted is None:
            emitted = per_part[step.part] = _PartOps(first=step)
            order.append(step.part)
        emitted.buffers.add(step.weights_buffer)
        # A constant copy lands in a buffer for the next stripe that reads that buffer (a
        # double buffer's next slice is copied right after the current slice's operation).
        last_stripe = index
        copied = pending.pop((step.part, step.weights_buffer), ())
        bias = pending.pop((step.part, step.bias_buffer), ())
        if step.weights_buffer < 0 and bias:  # weights read in place: the copy is charged
            areas = (
                emitter.memory.constants_area,
                emitter.area(emitter.buffers[step.bias_buffer].region),
            )
            fm_copies.setdefault(step.part, []).extend((*areas, n) for n in bias)
        else:
            copied += bias
        if copied and emitted.first_copy_hidden is None:
            keys = ((step.part, step.weights_buffer), (step.part, step.bias_buffer))
            emitted.first_copy_hidden = all(beside.get(key, True) for key in keys)
        for npu in ops:
            if isinstance(npu, NpuBlockOperation):
                emitted.stripes.append(npu)
                emitted.copies.append(copied)
                copied = ()
            elif npu.dest.region == BASE_PTR_INDEX_MEM2MEM:
                emitted.lut_bytes += npu.src.length
            else:  # a pad's fill, copied before the op like its input windows
                areas = (emitter.area(npu.src.region), emitter.area(npu.dest.region))
                fm_copies.setdefault(step.part, []).append((*areas, npu.src.length))
    scheduled = [
        _scheduled_op(emitter, net.ops[p], per_part[p], tuple(fm_copies.get(p, ()))) for p in order
    ]
    return [streams[k] for k in sorted(streams)], scheduled


def _scheduled_op(
    emitter: _Emitter, op: NpuOp, emitted: _PartOps, fm_copies: tuple[tuple[str, str, int], ...]
) -> ScheduledOp:
    stripes = tuple(emitted.stripes)
    if not stripes:
        raise ScheduleError(f"{op.name}: no NPU operation was emitted")
    first = emitted.first
    lead = stripes[0]
    copied = first.weights_buffer >= 0
    constants = emitter.memory.constants_area
    const_area = None
    if lead.weights or lead.biases:
        const_area = emitter.area(lead.weights[0].region if lead.weights else lead.biases[0].region)
    return ScheduledOp(
        name=op.name,
        stripes=stripes,
        ifm_area=emitter.area(lead.ifm.region),
        ofm_area=emitter.area(lead.ofm.region),
        ifm2_area=emitter.area(lead.ifm2.region)
        if lead.ifm2 is not None and lead.ifm2_scalar is None
        else None,
        const_area=const_area,
        weight_source_area=constants if copied else None,
        weight_buffering="double" if len(emitted.buffers) > 1 else "single",
        weight_copies=tuple(sum(dmas) for dmas in emitted.copies) if copied else (),
        weight_copy_dmas=tuple(emitted.copies) if copied else (),
        per_stripe=True,  # our streams are costed as they run: a slice reads the whole IFM
        first_copy_hidden=emitted.first_copy_hidden is not False,
        lut_source_area=constants if emitted.lut_bytes else None,
        lut_bytes=emitted.lut_bytes,
        feature_map_copies=fm_copies,
    )

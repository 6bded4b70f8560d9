"""Run a stripe schedule the way the NPU would: step by step in the schedule's order, every
stripe reading only the input boxes its part's Propagators name, from byte buffers the size
the schedule gave them, and writing its output box into its buffer. Anything the schedule or a
propagator gets wrong (a box read before it is produced, a box outside its buffer, a window
the op needs that the propagator does not cover) stops the run with a StripeError naming the
op, the stripe and the box.

Buffers are numpy byte arrays; a buffer's NHWC frame is viewed over its bytes in the tensor's
stored layout (NHWC, or NHCWB16 bricks), so a rolling buffer's rows and a window's origin are
where the schedule says. Beside each buffer a map records which tensor element every slot
holds, so a stale or missing element is caught, not read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from cascader.ir.boxes import Box
from cascader.ir.layout import BRICK, AffineRead, propagate_box, stored_shape
from cascader.ir.npu_ops import (
    Concatenation,
    Identity,
    Layout,
    NpuOp,
    NpuTensor,
    feature_inputs,
    resamples,
)
from cascader.ir.schedule import Buffer, Copy, Schedule, Stripe
from cascader.reference.run import op_reads, run_op_box


class StripeError(RuntimeError):
    """The schedule cannot be executed as written: the message names op, stripe and box."""


def propagated_box(propagator: AffineRead, ofm_box: Box, ofm: NpuTensor, ifm: NpuTensor) -> Box:
    """The NHWC box of `ifm` a propagator says the output box `ofm_box` of `ofm` reads."""
    return Box(*propagate_box(propagator, ofm_box.start, ofm_box.shape, ofm, ifm))


class _Held:
    """One buffer: its bytes, the elements viewed over them in the tensor's stored layout,
    and per NHWC slot the flat index (in the whole tensor) of the element it holds, or -1."""

    def __init__(self, buffer: Buffer, tensor: NpuTensor, memory: np.ndarray) -> None:
        self.buffer = buffer
        self.full = tensor.shape
        frame = tuple(buffer.frame)
        shape = stored_shape(replace(tensor, shape=frame))
        dtype = np.dtype(tensor.dtype)
        needed = math.prod(shape) * dtype.itemsize
        if needed > buffer.size:
            raise StripeError(
                f"buffer {buffer.index} of {tensor.name}: frame {frame} needs {needed} bytes, "
                f"it has {buffer.size}"
            )
        self.bytes = memory
        elements = self.bytes[:needed].view(dtype).reshape(shape)
        # NHCWB16 as (N, H, W, bricks, 16): a writable view, bricks split from channels
        self.elements = elements.transpose(0, 1, 3, 2, 4) if len(shape) == 5 else elements
        self.tags = np.full(frame, -1, np.int64)

    def _segments(self, box: Box, origin: tuple[int, ...]) -> list[tuple[slice, tuple[slice, ...]]]:
        """(rows of the box, slots in the frame) pieces of an absolute box: a window is offset
        by its origin, a rolling buffer holds row r at r mod rows."""
        frame = self.tags.shape
        if self.buffer.kind == "rolling":
            rows = frame[1]
            if box.shape[1] > rows:
                raise ValueError(f"{box.shape[1]} rows asked of a {rows}-row rolling buffer")
            pieces, row = [], box.start[1]
            while row < box.end[1]:
                take = min(box.end[1] - row, rows - row % rows)
                local = slice(row - box.start[1], row - box.start[1] + take)
                start = (box.start[0], row % rows, box.start[2], box.start[3])
                shape = (box.shape[0], take, box.shape[2], box.shape[3])
                pieces.append((local, self._frame_slices(start, shape, (0, 0, 0, 0))))
                row += take
            return pieces
        base = origin if self.buffer.kind == "window" else (0, 0, 0, 0)
        return [(slice(0, box.shape[1]), self._frame_slices(box.start, box.shape, base))]

    def _frame_slices(self, start, shape, base) -> tuple[slice, ...]:
        rel = [s - b for s, b in zip(start, base, strict=True)]
        if any(r < 0 or r + n > f for r, n, f in zip(rel, shape, self.tags.shape, strict=True)):
            raise ValueError(f"slots {tuple(rel)} + {tuple(shape)} outside frame {self.tags.shape}")
        return tuple(slice(r, r + n) for r, n in zip(rel, shape, strict=True))

    def _get(self, slots: tuple[slice, ...]) -> np.ndarray:
        if self.elements.ndim == 4:
            return self.elements[slots].copy()
        n, h, w, c = slots
        bricks = self.elements[n, h, w, c.start // BRICK : -(-c.stop // BRICK)]
        flat = bricks.reshape(*bricks.shape[:3], -1)
        first = c.start // BRICK * BRICK
        return flat[..., c.start - first : c.stop - first].copy()

    def _set(self, slots: tuple[slice, ...], values: np.ndarray) -> None:
        if self.elements.ndim == 4:
            self.elements[slots] = values
            return
        n, h, w, c = slots
        bricks = self.elements[n, h, w, c.start // BRICK : -(-c.stop // BRICK)]
        flat = bricks.reshape(*bricks.shape[:3], -1)  # a copy: bricks are not contiguous
        first = c.start // BRICK * BRICK
        flat[..., c.start - first : c.stop - first] = values
        bricks[...] = flat.reshape(bricks.shape)

    def read(self, box: Box, origin: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """The values and tags held for an absolute box of the whole tensor."""
        values = np.empty(box.shape, self.elements.dtype)
        tags = np.empty(box.shape, np.int64)
        for rows, slots in self._segments(box, origin):
            values[:, rows] = self._get(slots)
            tags[:, rows] = self.tags[slots]
        return values, tags

    def write(self, box: Box, origin: tuple[int, ...], values: np.ndarray) -> None:
        flat = _flat_indices(box, self.full)
        for rows, slots in self._segments(box, origin):
            self._set(slots, values[:, rows])
            self.tags[slots] = flat[:, rows]


def _in_whole(box: Box, origin: tuple[int, ...]) -> Box:
    """A box of a tensor held in part of another's whole buffer (a concatenation's input
    written in place, whose origin is minus its offset) as a box of the holding tensor."""
    return Box(tuple(s - o for s, o in zip(box.start, origin, strict=True)), box.shape)


def _flat_indices(box: Box, shape: tuple[int, ...]) -> np.ndarray:
    """Row-major flat index, in a tensor of `shape`, of every element of `box`."""
    strides = [math.prod(shape[a + 1 :]) for a in range(len(shape))]
    flat = np.zeros(box.shape, np.int64)
    for axis, (start, size, stride) in enumerate(zip(box.start, box.shape, strides, strict=True)):
        index = [1] * len(shape)
        index[axis] = size
        flat += (np.arange(start, start + size, dtype=np.int64) * stride).reshape(index)
    return flat


def _written(op: NpuOp, ofm: Box, result: np.ndarray) -> list[tuple[Box, np.ndarray]]:
    """The boxes a stripe writes, with their values: all of its output box, but for a
    concatenation the slices its inputs' producers wrote in place, which it leaves alone."""
    if not isinstance(op, Concatenation) or not op.in_place:
        return [(ofm, result)]
    pieces = []
    for slot, copy in enumerate(op.copies):
        inside = Box(copy.ofm_offset, tuple(copy.region)).intersect(ofm)
        if slot in op.in_place or inside.empty:
            continue
        local = tuple(
            slice(s - o, s - o + n)
            for s, o, n in zip(inside.start, ofm.start, inside.shape, strict=True)
        )
        pieces.append((inside, result[local]))
    return pieces


class StripedExecutor:
    """Executes a Schedule on the integer reference. `propagators` (per part id) replaces the
    graph's propagators for the reads, to check a schedule against other propagators."""

    def __init__(
        self, schedule: Schedule, propagators: Mapping[int, Sequence[AffineRead]] | None = None
    ) -> None:
        net = schedule.network
        self.schedule = schedule
        self.net = net
        self.own = net.own_ops
        self.propagators = {p.id: list(p.propagators) for p in net.graph.parts}
        self.propagators.update({k: list(v) for k, v in (propagators or {}).items()})
        self.alias = dict(net.aliases)
        self._function_of_tensor = {
            tensor.id: net.function_of[part.id]
            for part in net.graph.parts
            for tensor in (part.output, *part.inputs)
        }
        self.stripes_run = 0  # over every run
        # buffer index -> its view of the region's bytes and the elements it holds, fresh per
        # run of the function whose tensor it holds
        self._held: dict[int, _Held] = {}
        self._constants: dict[int, tuple[int, int]] = {}  # buffer -> output channels it holds
        # Per memory region its bytes: a buffer's memory is a view at its address, so buffers
        # that share bytes (one written over another, or at one address at different times)
        # see each other's writes, as on the NPU.
        ends: dict[int, int] = {}
        for buffer in schedule.buffers:
            ends[buffer.region] = max(ends.get(buffer.region, 0), buffer.address + buffer.size)
        self._regions = {region: np.zeros(end, np.uint8) for region, end in ends.items()}
        # A copy buffer holds boxes in its reading op's shape of the tensor, which is not the
        # tensor's own where the op reads it under another shape.
        self._copy_shape = {
            step.dest: self._view_shape(step) for step in schedule.steps if isinstance(step, Copy)
        }

    def _view_shape(self, copy: Copy) -> tuple[int, ...]:
        """The shape of its tensor the box of a copy is given in: its reading part's."""
        part = self.net.graph.parts[copy.part]
        if copy.what != "feature_map":
            return ()
        slot = next(i for i, t in enumerate(part.inputs) if t.id == copy.tensor)
        return tuple(feature_inputs(self.net.ops[copy.part])[slot].shape)

    def _root(self, tid: int) -> int:
        while tid in self.alias:
            tid = self.alias[tid]
        return tid

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The outputs of a schedule of one NPU function (a model that runs entirely on the
        NPU); `run_function` runs one function of several."""
        if len(self.net.functions) != 1:
            raise StripeError(
                f"{len(self.net.functions)} NPU functions: run each with run_function"
            )
        return self.run_function(0, inputs)

    def run_function(self, index: int, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """NPU function `index`'s outputs (its output order, 4-D) for inputs in its input
        order: the host writes its graph inputs, its steps run in schedule order, the host
        reads its outputs. The buffers of other functions keep what they hold, as the host
        ops between functions leave the NPU's memory alone."""
        function = self.net.functions[index]
        if len(inputs) != len(function.inputs):
            raise StripeError(f"{len(inputs)} inputs given, {len(function.inputs)} expected")
        given = dict(zip(function.inputs, inputs, strict=True))
        mine = {t for t, f in self._function_of_tensor.items() if f == index}
        self._held = {k: v for k, v in self._held.items() if v.buffer.tensor not in mine}
        self._constants = {
            k: v for k, v in self._constants.items() if self.schedule.buffers[k].tensor not in mine
        }
        graph = self.net.graph
        passed = {}  # the function's graph input tensor -> its input name
        for tensor in graph.input_tensors:
            if tensor.is_constant or tensor.id not in mine:
                continue
            passed[tensor.id] = name = self.net.feature_map(tensor.id).name
            buffer = self.schedule.tensor_buffer.get(self._root(tensor.id))
            if buffer is None:
                continue
            held = self._buffer(buffer)
            whole = Box.whole(held.full)
            held.write(whole, whole.start, np.asarray(given[name]).reshape(held.full))
        for step, item in enumerate(self.schedule.steps):
            if self.net.function_of[item.part] != index:
                continue
            if isinstance(item, Stripe):
                self._stripe(step, item)
            else:
                self._copy(step, item)
        outputs = {}
        for tensor in graph.output_tensors:
            if tensor.id not in mine:
                continue
            root = self._root(tensor.id)
            ofm = self.net.feature_map(tensor.id)
            buffer = self.schedule.tensor_buffer.get(root)
            if buffer is None and root in passed:  # the output is an input, reshaped
                outputs[ofm.name] = np.asarray(given[passed[root]]).reshape(ofm.shape)
                continue
            if buffer is None:
                raise StripeError(f"output {ofm.name}: no buffer holds it")
            where = f"output {ofm.name}"
            outputs[ofm.name] = self._read(where, buffer, ofm.shape, Box.whole(ofm.shape), None)
        return [outputs[name] for name in function.outputs]

    def _buffer(self, index: int) -> _Held:
        held = self._held.get(index)
        if held is None:
            buffer = self.schedule.buffers[index]
            tensor = replace(self.net.feature_map(buffer.tensor), layout=buffer.layout)
            if self._copy_shape.get(index):
                tensor = replace(tensor, shape=self._copy_shape[index])
            memory = self._regions[buffer.region][buffer.address : buffer.address + buffer.size]
            held = self._held[index] = _Held(buffer, tensor, memory)
        return held

    def _read(
        self,
        where: str,
        index: int,
        shape: tuple[int, ...],
        box: Box,
        origin: tuple | None,
        in_part: bool = False,
    ) -> np.ndarray:
        """An absolute box of a tensor read as `shape` from buffer `index`; StripeError unless
        every element is there. `in_part`: the tensor lies in part of the buffer's (an input
        written in place into a concatenation), even where it starts at its origin."""
        held = self._buffer(index)
        buffer = held.buffer
        where = (
            f"{where}: box {box} from buffer {index} ({buffer.kind}, frame {tuple(buffer.frame)}"
            f"{'' if origin is None else f', origin {tuple(origin)}'})"
        )
        origin = origin or (0, 0, 0, 0)
        if buffer.kind == "tensor" and (in_part or any(origin)):  # a part of the buffer's
            box, origin, shape = _in_whole(box, origin), (0, 0, 0, 0), held.full
        try:
            if tuple(shape) == tuple(held.full):
                values, tags = held.read(box, origin)
                expected = _flat_indices(box, held.full)
            else:  # another shape of the same bytes: only a whole NHWC tensor reads as one
                if buffer.kind != "tensor" or buffer.layout != Layout.NHWC:
                    raise ValueError(f"read as {shape}, but the buffer holds {held.full} in part")
                values, tags = held.read(Box.whole(held.full), origin)
                values = values.reshape(shape)[box.slices()]
                tags = tags.reshape(shape)[box.slices()]
                expected = _flat_indices(box, shape)
        except ValueError as error:
            raise StripeError(f"{where}: outside its buffer ({error})") from None
        wrong = np.argwhere(tags != expected)
        if len(wrong):
            first = tuple(int(v) for v in wrong[0])
            element = tuple(o + i for o, i in zip(box.start, first, strict=True))
            held_tag = int(tags[first])
            holds = "nothing" if held_tag < 0 else f"flat element {held_tag}"
            raise StripeError(
                f"{where}: {len(wrong)} elements not produced yet, first {element} "
                f"(its slot holds {holds})"
            )
        return values

    def _copy(self, step: int, copy: Copy) -> None:
        if copy.what != "feature_map":
            self._constants[copy.dest] = (copy.box.start[0], copy.box.start[0] + copy.box.shape[0])
            return
        box = copy.box
        shape = self._copy_shape[copy.dest]
        where = f"step {step}: copy of tensor {copy.tensor} for part {copy.part}"
        values = self._read(where, copy.source, shape, box, None)
        self._buffer(copy.dest).write(box, box.start, values)

    def _stripe(self, step: int, stripe: Stripe) -> None:
        op, own = self.net.ops[stripe.part], self.own[stripe.part]
        ofm = stripe.ofm
        where = f"step {step}: {op.name} (part {stripe.part}) stripe {ofm}"
        if isinstance(own, Identity) and own.operator != "RESHAPE" and own.ofm_fill is None:
            # a block copy into part of its OFM (concatenation) writes only its own region
            region = own.region or own.ofm.shape
            ofm = ofm.intersect(Box(own.ofm_offset or (0,) * len(region), tuple(region)))
        self._check_constants(where, stripe)
        reads = op_reads(own, ofm)
        propagators = self.propagators[stripe.part]
        inputs: list[np.ndarray | None] = []
        slots = zip(feature_inputs(op), feature_inputs(own), reads, stripe.ifms, strict=True)
        for slot, (tensor, view, read, (given, index, origin)) in enumerate(slots):
            if index < 0:  # a scalar operand
                inputs.append(None)
                continue
            box = propagated_box(propagators[slot], ofm, op.ofm, tensor)
            if index in self._copy_shape and given.contains(read) and not given.contains(box):
                box = given  # a copy holds what the stripe reads, not all a reshape's view
            here = f"{where} input {slot}"
            if read is not None and 0 in read.shape:  # a pad's border stripe reads nothing
                inputs.append(np.zeros(read.shape, np.dtype(tensor.dtype)))
                continue
            if view.shape != tensor.shape and box != Box.whole(tensor.shape):
                raise StripeError(
                    f"{here}: reads {tensor.name} as {view.shape}, which needs all of it; "
                    f"the propagator gives {box}"
                )
            needed = view.shape == tensor.shape and read is not None and 0 not in read.shape
            if needed and not box.contains(read):
                raise StripeError(f"{here}: needs {read}, the propagator gives only {box}")
            if needed and resamples(own):  # its propagator rounds half rows outwards: a
                box = read  # stripe reads what the op reads, which its buffer holds
            in_part = self.net.graph.parts[stripe.part].inputs[slot].id in self.net.offsets
            values = self._read(here, index, tensor.shape, box, origin, in_part)
            if view.shape != tensor.shape:
                inputs.append(values.reshape(view.shape)[read.slices()])
                continue
            local = tuple(
                slice(r - b, r - b + n)
                for r, b, n in zip(read.start, box.start, read.shape, strict=True)
            )
            inputs.append(values[local])
        result = run_op_box(own, inputs, ofm)
        held = self._buffer(stripe.ofm_buffer)
        for box, values in _written(op, ofm, result):
            origin = stripe.ofm_origin
            if held.buffer.kind == "tensor" and any(origin):  # written in place into a part
                box, origin = _in_whole(box, origin), (0, 0, 0, 0)
            try:
                held.write(box, origin, values.astype(held.elements.dtype, copy=False))
            except ValueError as error:
                raise StripeError(
                    f"{where}: writes outside buffer {stripe.ofm_buffer}: {error}"
                ) from None
        self.stripes_run += 1

    def _check_constants(self, where: str, stripe: Stripe) -> None:
        """Weights and scale-bias copied for the stripe's output channels, when copied."""
        for index, what in ((stripe.weights_buffer, "weights"), (stripe.bias_buffer, "biases")):
            if index < 0 or stripe.channels is None:
                continue
            lo, hi = self._constants.get(index, (0, 0))
            if not lo <= stripe.channels[0] <= stripe.channels[1] <= hi:
                raise StripeError(
                    f"{where}: {what} of channels {stripe.channels} not in buffer {index} "
                    f"(it holds {(lo, hi) if hi else 'nothing'})"
                )

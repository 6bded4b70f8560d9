"""Reshape, requantize and block copies (concatenate, split, slices, pad).

A block copy writes a region of its OFM from a (strided) block of its IFM; a pad fills the rest
of the OFM, a concatenation leaves it to the other copies. A requantizing copy runs on the NPU
as a 1x1 average pool: a whole-tensor QUANTIZE with Vela's fused-quantize scale
(`quantise_scale(ifm / ofm)`, TFL rounding), a block written into a concatenation with its
ConcatSliceWrite scale (the global pooling scale, NATURAL rounding).
"""

from __future__ import annotations

import numpy as np
from ethosu.vela.scaling import quantise_scale

from cascader.ir.boxes import Box
from cascader.ir.npu_ops import Activation, Identity, Kernel
from cascader.reference.pooling import global_pooling_scale
from cascader.reference.scaling import apply_scale, output_stage, zero_point


def _written(op: Identity) -> Box:
    """The region of the OFM the copy writes from its IFM."""
    region = op.region or op.ofm.shape
    return Box(op.ofm_offset or (0,) * len(region), tuple(region))


def _strides(op: Identity) -> tuple[int, ...]:
    return op.ifm_strides or (1,) * len(_written(op).shape)


def identity_reads(op: Identity, ofm_box: Box) -> Box:
    """The box of the IFM an OFM box is computed from (a true reshape reads all of it)."""
    if op.operator == "RESHAPE":
        return ofm_box if op.ifm.shape == op.ofm.shape else Box.whole(op.ifm.shape)
    written = _written(op)
    inside = written.intersect(ofm_box)
    source = op.ifm_offset or (0,) * len(inside.shape)
    strides = _strides(op)
    offset = tuple(
        s + (i - w) * t
        for s, i, w, t in zip(source, inside.start, written.start, strides, strict=True)
    )
    if 0 in inside.shape:
        return Box(offset, (0,) * len(offset))
    return Box(offset, tuple((n - 1) * t + 1 for n, t in zip(inside.shape, strides, strict=True)))


def identity_box(op: Identity, ifm: np.ndarray, ofm_box: Box) -> np.ndarray:
    """The OFM box from the IFM box `identity_reads` names. Without a fill, the box must lie
    in the region this copy writes."""
    if op.operator == "RESHAPE" and op.ifm.shape == op.ofm.shape:
        return ifm.copy()
    if op.operator == "RESHAPE":
        return ifm.reshape(op.ofm.shape)[ofm_box.slices()].copy()
    written = _written(op)
    if op.ofm_fill is None and not written.contains(ofm_box):
        raise ValueError(f"{op.name}: writes only {written}, asked for {ofm_box}")
    source = ifm[tuple(slice(None, None, t) for t in _strides(op))]
    if op.operator == "REQUANTIZE":
        source = _requantize(op, source, block=bool(op.region))
    out = np.full(ofm_box.shape, 0 if op.ofm_fill is None else op.ofm_fill, np.dtype(op.ofm.dtype))
    inside = written.intersect(ofm_box)
    if 0 in inside.shape:  # a stripe of a pad's border: nothing of the IFM
        return out
    local = tuple(i - o for i, o in zip(inside.start, ofm_box.start, strict=True))
    out[Box(local, inside.shape).slices()] = source
    return out


def identity(op: Identity, ifm: np.ndarray, ofm: np.ndarray | None) -> np.ndarray:
    """The OFM after `op`; a block copy without a fill writes into `ofm` (the tensor other
    copies of the same concatenation wrote) when given."""
    whole = Box.whole(op.ofm.shape)
    box = whole if op.operator == "RESHAPE" or op.ofm_fill is not None else _written(op)
    data = identity_box(op, ifm.reshape(op.ifm.shape)[identity_reads(op, box).slices()], box)
    if box == whole:
        return data
    if ofm is not None and ofm.size == int(np.prod(op.ofm.shape)):
        out = ofm.reshape(op.ofm.shape).copy()
    else:
        out = np.zeros(op.ofm.shape, np.dtype(op.ofm.dtype))
    out[box.slices()] = data
    return out


def _requantize(op: Identity, values: np.ndarray, block: bool) -> np.ndarray:
    x = values.astype(np.int64) - zero_point(op.ifm)
    if block:
        scale, shift = global_pooling_scale(Kernel(1, 1), op.ifm.quant.scale, op.ofm.quant.scale)
        scaled = apply_scale(x, scale, shift, "NATURAL")
    else:
        scale, shift = quantise_scale(op.ifm.quant.scale / op.ofm.quant.scale)
        scaled = apply_scale(x, scale, shift, "TFL")
    return output_stage(scaled, op.ofm, Activation())

"""TRANSPOSE_CONV as an ordinary conv2d over a zero-upscaled IFM, as Vela runs it.

With stride 2 the NPU inserts zeros between IFM elements on the fly (TRANSPOSE resampling)
and the convolution itself has stride 1; the kernel is flipped in H and W, and the padding
comes from Vela's own upscaled-padding rule. With stride 1 it is a plain conv2d with Vela's
SAME/VALID padding of the flipped kernel.
"""

from __future__ import annotations

import numpy as np
from ethosu.vela.operation import Kernel as VelaKernel
from ethosu.vela.operation import Padding as VelaPadding
from ethosu.vela.shape4d import Shape4D
from ethosu.vela.tflite_graph_optimiser import (
    calc_padding_and_skirt,
    calc_upscaled_padding_and_skirt,
)

from cascader.ir.npu_ops import Kernel, Padding


def transpose_conv_geometry(
    weights_iohw: np.ndarray,
    stride_hw: tuple[int, int],
    ifm_shape: tuple[int, ...],
    ofm_shape: tuple[int, ...],
) -> tuple[np.ndarray, Kernel, Padding, str]:
    """(OHWI weights flipped in H and W, stride-1 kernel, padding, IFM upscale mode)."""
    weights = np.flip(weights_iohw.transpose(1, 2, 3, 0), axis=(1, 2))
    kh, kw = weights.shape[1:3]
    sh, sw = stride_hw
    same = ofm_shape[1] == ifm_shape[1] * sh and ofm_shape[2] == ifm_shape[2] * sw
    padding_type = VelaPadding.SAME if same else VelaPadding.VALID
    ifm4 = Shape4D(list(ifm_shape))
    if sh > 1 or sw > 1:
        pads, _ = calc_upscaled_padding_and_skirt(
            padding_type,
            (kh, kw),
            (1, 1, 1, 1),
            ifm4,
            ofm_shape[1] // ifm_shape[1],
            ofm_shape[2] // ifm_shape[2],
        )
        upscale = "ZEROS"
    else:
        pads, _ = calc_padding_and_skirt(padding_type, VelaKernel(kw, kh), ifm4, None)
        upscale = "NONE"
    return np.ascontiguousarray(weights), Kernel(kh, kw), Padding(*pads), upscale

"""NPU functions -> CascaderGraph: propagators, graph shape against the original's golden graphs,
the memory setup, a cascader run on real models, graph JSON round trip and `dse graph`."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import te

from cascader.core import CascaderOptions, cascade
from cascader.core.graph import CascaderGraph
from cascader.core.graph_json import graph_to_json, save_graph
from cascader.core.part import InlinePart
from cascader.core.stripe_config import StripeConfig
from cascader.ethosu.device import valid_blocks
from cascader.ethosu.graph import build_cascader_graph, graph_document, npu_op_description
from cascader.ethosu.graph_json import load_graph
from cascader.ethosu.memory import system_memory
from cascader.ethosu.part import EthosuPart
from cascader.ethosu.propagation import op_propagation, subkernels
from cascader.frontend.passes import model_npu_functions
from cascader.frontend.tflite_import import load_tflite
from cascader.ir.layout import stored_shape
from cascader.ir.npu_ops import (
    Activation,
    Concatenation,
    Conv2D,
    Kernel,
    Layout,
    NpuTensor,
    Padding,
    Pooling,
    Quant,
    feature_map,
)
from cascader.lowering.te import te_compute
from cascader.reference.run import run_op
from cascader.testing.networks import chain
from cascader.testing.shared import shared_dir
from dse.cli import main as dse_main

SHARED = shared_dir()
Q = Quant(0.05, 0)


def _model(name: str) -> Path:
    path = SHARED / "models" / f"{name}.tflite" if SHARED else None
    if path is None or not path.is_file():
        pytest.skip(f"shared model {name} not present")
    return path


def _golden(name: str) -> dict:
    path = SHARED / "golden" / f"{name}.json" if SHARED else None
    if path is None or not path.is_file():
        pytest.skip(f"golden graph {name} not present")
    return json.loads(path.read_text())


@cache
def _graph(name: str) -> CascaderGraph:
    return build_cascader_graph(model_npu_functions(load_tflite(_model(name))))


def _conv(ifm: NpuTensor, ofm: NpuTensor, kernel: Kernel, padding: Padding, kind="conv2d"):
    depth = 1 if kind == "depthwise_conv2d" else ifm.shape[3]
    c = ofm.shape[3]
    return Conv2D(
        name="conv",
        kind=kind,
        ifm=ifm,
        ofm=ofm,
        kernel=kernel,
        padding=padding,
        weights=np.zeros((c, kernel.height, kernel.width, depth), np.int8),
        weight_zero_point=0,
        biases=np.zeros(c, np.int64),
        multipliers=np.ones(c, np.int32),
        shifts=np.zeros(c, np.int32),
        activation=Activation(),
    )


def _rows(shape: tuple[int, ...], offset: tuple[int, ...] | None = None) -> StripeConfig:
    """A stripe config with one stripe of `shape` looping over height."""
    n = len(shape)
    return StripeConfig(shape, shape, shape, (0, 1) + (0,) * (n - 2), (1,) * n,
                        offset or (0,) * n)  # fmt: skip


def test_strided_conv_reads_its_window_with_padding():
    """3x3 stride 2, padding 1: output rows 0..3 need input rows -1..7 (9 rows, the first one
    padding), all input channels; weights and scale-bias follow the output channels."""
    ifm = NpuTensor("x", (1, 16, 16, 8), Q)
    ofm = NpuTensor("y", (1, 8, 8, 32), Q)
    op = _conv(ifm, ofm, Kernel(3, 3, 2, 2), Padding(1, 1, 1, 1))
    ifm_p, weights_p, bias_p = op_propagation(op, (1, 2, 2, 8)).propagators
    stripe = _rows((1, 4, 8, 32))
    need = ifm_p.propagate(stripe)
    assert need.shape == (1, 9, 17, 8)
    assert need.offset == (0, -1, -1, 0)
    assert weights_p.propagate(stripe).shape == (32, 3, 3, 8)
    assert bias_p.propagate(stripe).shape == (32, 10)
    assert need.strides[1] == 8  # the next stripe starts 8 rows on: stripes overlap by one row


def test_brick_layouts_compose_into_the_propagator():
    """NHCWB16 -> NHCWB16 depthwise 3x3: a 5-D stripe of 2 rows x 1 brick needs 4 rows of the
    same brick; the channel brick follows the output brick (depthwise)."""
    ifm = NpuTensor("x", (1, 10, 10, 48), Q, layout=Layout.NHCWB16)
    ofm = NpuTensor("y", (1, 10, 10, 48), Q, layout=Layout.NHCWB16)
    op = _conv(ifm, ofm, Kernel(3, 3), Padding(1, 1, 1, 1), kind="depthwise_conv2d")
    (ifm_p, weights_p, _) = op_propagation(op, (1, 2, 1, 2, 8)).propagators
    assert (ifm_p.input_dims, ifm_p.output_dims) == (5, 5)
    need = ifm_p.propagate(_rows((1, 2, 1, 10, 16)))
    assert need.shape == (1, 4, 1, 12, 16)
    assert need.offset == (0, -1, 0, -1, 0)
    assert weights_p.propagate(_rows((1, 2, 1, 10, 16))).shape == (16, 3, 3, 1)
    assert stored_shape(ofm) == (1, 10, 3, 10, 16)


def test_large_kernels_split_into_subkernels_and_describe_for_the_device():
    ifm = NpuTensor("x", (1, 49, 10, 1), Q)
    ofm = NpuTensor("y", (1, 25, 5, 64), Q)
    op = _conv(ifm, ofm, Kernel(10, 4, 2, 2), Padding(4, 1, 5, 1))
    assert subkernels(op) == 2
    description = npu_op_description(op)
    assert (description.kind, description.kernel, description.stride) == ("conv2d", (10, 4), (2, 2))
    assert description.ifm_shape == (49, 10, 1)


def test_an_upscaling_op_is_described_with_its_upscale():
    """The U-Net's last transpose conv (a 3x3 conv over a zero-upscaled 64x64x32 IFM) reads
    only a 10x10 IFM block per 16x16 OFM block, so 16x16x16 fits the shared buffer: the block
    Vela's C++ core runs it with, fetching its weights 64 times instead of 128. Described
    without the upscale, the IFM block would be 18x18 and the block would not be valid."""
    ifm = NpuTensor("x", (1, 64, 64, 32), Q, layout=Layout.NHCWB16)
    ofm = NpuTensor("y", (1, 128, 128, 16), Q, layout=Layout.NHCWB16)
    op = replace(_conv(ifm, ofm, Kernel(3, 3), Padding(2, 2, 0, 0)), upscale="ZEROS")
    description = npu_op_description(op)
    assert description.upscale == "TRANSPOSE"
    assert (16, 16, 16) in valid_blocks("ethos-u55-256", description)
    assert (16, 16, 16) not in valid_blocks("ethos-u55-256", replace(description, upscale="NONE"))
    resize = Pooling("r", "AVG", ifm, ofm, Kernel(1, 1), Padding(0, 0, 0, 0), Activation(),
                     upscale="NEAREST")  # fmt: skip
    assert npu_op_description(resize).upscale == "NEAREST"


# Our graphs beside the original's (TVM v0.18, ethos-u55-256), golden (parts, tensors).
# Ours have no inline reshape parts (reshapes between NPU ops are elided before the graph is
# built; the original kept each as an inline part) and no final NPU copy of the output (the
# original wrote the reshaped softmax output with one more identity op); both run softmax on
# the NPU. So our NPU parts are the original's minus that copy, give or take an op of a
# differently legalized MEAN; the weights are the same arrays but that MEAN's.
GOLDEN = {
    "kws_dscnn": ("kws_dscnn_s1_p64k", 49, 80),
    "ic_resnet8": ("ic_resnet8_s1_p32k", 52, 83),
    "vww_mobilenet_v1_025": ("vww_mobilenet_v1_025_s1_p64k", 65, 132),
    "mobilenet_v2_100_224": ("mobilenet_v2_100_224_s1_p256k", 103, 222),
    "ad_autoencoder": ("ad_autoencoder_s1_p16k", 41, 62),
}


@pytest.mark.parametrize("model", list(GOLDEN))
def test_graph_compares_with_the_golden_graph(model):
    golden_name, golden_parts, golden_tensors = GOLDEN[model]
    golden = _golden(golden_name)
    graph = _graph(model)
    assert (len(golden["parts"]), len(golden["tensors"])) == (golden_parts, golden_tensors)
    golden_npu = [p for p in golden["parts"] if p["kind"] == "ethosu"]
    npu = [p for p in graph.parts if isinstance(p, EthosuPart)]
    assert abs(len(npu) - (len(golden_npu) - 1)) <= 2
    weights = [tuple(t["shape"]) for t in golden["tensors"] if t["is_constant"] and
               t["dtype"] == "int8" and len(t["shape"]) == 4]  # fmt: skip
    ours = [p.inputs[1].shape for p in npu if p.weight_tensor_idx == 1]
    extra, missing = Counter(ours) - Counter(weights), Counter(weights) - Counter(ours)
    assert extra.total() + missing.total() <= 1  # a MEAN as a depthwise conv, or not
    # Every tensor but the outputs is read, every part's output is a distinct tensor, and the
    # input is the model's input (as a 4-D feature map).
    assert all(t.consumers for t in graph.tensors if t not in graph.output_tensors)
    assert len({p.output.id for p in graph.parts}) == len(graph.parts)
    golden_input = next(t for t in golden["tensors"] if t["id"] in golden["inputs"]
                        and not t["is_constant"])  # fmt: skip
    features = [t for t in graph.input_tensors if not t.is_constant]
    assert [math.prod(t.shape) for t in features] == [math.prod(golden_input["shape"])]
    for part in npu:
        assert part.block_configs
        assert part.stripe_align_hint == part.output_quantum


def test_output_quanta_and_propagators_match_the_original_for_kws():
    """The first conv of kws (10x4 stride 2, NHWC in, NHCWB16 out) has the original's
    propagator matrices, offsets and output quantum."""
    golden = _golden("kws_dscnn_s1_p64k")
    graph = _graph("kws_dscnn")
    ours = next(p for p in reversed(graph.parts) if isinstance(p, EthosuPart))
    theirs = golden["parts"][-1]
    assert list(ours.output_quantum) == theirs["output_quantum"]
    assert ours.subkernels == theirs["subkernels"]
    for mine, original in zip(ours.propagators, theirs["propagators"], strict=True):
        assert mine.transform.tolist() == original["transform"]
        assert list(mine.offset) == original["offset"]


def test_homes_follow_the_memory_mode():
    graph = _graph("kws_dscnn")
    shared = graph_document(
        graph, system_memory("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram", 65536)
    )
    for tensor in graph.tensors:
        assert shared.home_map[tensor.id] == (["offchip_flash"] if tensor.is_constant else ["sram"])
    assert shared.options.cascade_region == "sram"
    assert shared.regions["sram"].size == 65536
    dedicated = graph_document(
        graph, system_memory("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram", 65536)
    )
    output = graph.output_tensors[0].id
    interior = graph.parts[1].output.id
    assert dedicated.home_map[output] == ["dram"]
    assert dedicated.home_map[interior] == ["sram", "dram"]


@pytest.mark.parametrize("model", ["kws_dscnn", "ic_resnet8"])
def test_cascade_runs_on_real_models(model):
    graph = _graph(model)
    memory = system_memory("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram", 1 << 18)
    doc = graph_document(graph, memory, CascaderOptions(enable_striping=True))
    result = cascade(graph, doc.regions, doc.home_map, doc.options)
    assert result.proposals
    chosen = result.chosen
    assert 0 < chosen.memory_usage <= 1 << 18
    assert chosen.cycles > 0
    covered = 0
    for plan in chosen.plans:
        covered |= plan.part_group
    assert covered == graph.all_parts_mask


def test_graph_json_round_trips(tmp_path):
    graph = _graph("kws_dscnn")
    memory = system_memory("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram", 65536)
    doc = graph_document(graph, memory)
    path = tmp_path / "kws.json"
    save_graph(doc, path)
    loaded = load_graph(path)
    assert graph_to_json(loaded) == graph_to_json(doc)
    assert sum(isinstance(p, InlinePart) for p in loaded.graph.parts) == 0
    first = cascade(graph, doc.regions, doc.home_map, doc.options)
    again = cascade(loaded.graph, loaded.regions, loaded.home_map, loaded.options)
    assert [(p.memory_usage, p.cycles) for p in again.proposals] == [
        (p.memory_usage, p.cycles) for p in first.proposals
    ]


def test_dse_graph_writes_a_runnable_graph(tmp_path, capsys):
    model = _model("kws_dscnn")
    out = tmp_path / "g.json"
    assert dse_main(["graph", "--model", str(model), "-o", str(out)]) == 0
    assert dse_main(["propose", "--graph", str(out), "--sram", "64KiB", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert printed["proposals"]


@pytest.mark.parametrize(
    "extra",
    [["--accelerator-config", "ethos-u99"], ["--memory-mode", "Nope"], ["--system-config", "X"]],
)
def test_dse_graph_bad_device_is_bad_input(tmp_path, extra, capsys):
    model = _model("kws_dscnn")
    argv = ["graph", "--model", str(model), "-o", str(tmp_path / "g.json"), *extra]
    assert dse_main(argv) == 2
    assert "valid names" in capsys.readouterr().err


def test_dse_graph_bad_model_is_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a flatbuffer")
    assert dse_main(["graph", "--model", str(bad), "-o", str(tmp_path / "g.json")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def _run_te(op, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """Compile the op's TE for the host CPU and run it on `arrays` (by placeholder role)."""
    compute = te_compute(op)
    roles = list(compute.inputs)
    func = te.create_prim_func([*(compute.inputs[r] for r in roles), compute.output])
    module = tvm.compile(func, target="llvm")
    out = tvm.runtime.tensor(
        np.zeros([int(v) for v in compute.output.shape], str(compute.output.dtype))
    )
    module(*(tvm.runtime.tensor(arrays[r]) for r in roles), out)
    return out.numpy()


def test_conv_te_computes_the_quantised_convolution():
    """A 3x3 stride 2 conv with padding, NHWC in, NHCWB16 out, against numpy."""
    rng = np.random.default_rng(0)
    ifm = NpuTensor("x", (1, 7, 6, 3), Quant(0.1, 3))
    ofm = NpuTensor("y", (1, 4, 3, 20), Quant(0.2, -5), layout=Layout.NHCWB16)
    op = _conv(ifm, ofm, Kernel(3, 3, 2, 2), Padding(1, 1, 1, 1))
    x = rng.integers(-128, 128, (1, 7, 6, 3), dtype=np.int8)
    w = rng.integers(-128, 128, (20, 3, 3, 3), dtype=np.int8)
    bias = rng.integers(-1000, 1000, 20).astype(np.int64)
    mult = rng.integers(1 << 29, 1 << 30, 20).astype(np.int32)
    shift = rng.integers(36, 40, 20).astype(np.int32)
    got = _run_te(op, {"ifm": x, "weights": w, "bias": bias, "multiplier": mult, "shift": shift})
    padded = np.pad(x.astype(np.int64) - 3, ((0, 0), (1, 1), (1, 1), (0, 0)))
    acc = np.zeros((4, 3, 20), np.int64)
    for ky in range(3):
        for kx in range(3):
            window = padded[0, ky : ky + 8 : 2, kx : kx + 6 : 2, :]
            acc += window @ w[:, ky, kx, :].astype(np.int64).T
    s = shift.astype(np.int64)
    scaled = ((acc + bias) * mult + (1 << (s - 1))) >> s
    want = np.clip(scaled - 5, -128, 127)
    nhwc = got.transpose(0, 1, 3, 2, 4).reshape(1, 4, 3, 32)[..., :20]
    assert np.array_equal(nhwc[0], want)
    assert got.shape == stored_shape(ofm)


def test_concatenation_te_computes_what_the_reference_does():
    """Three inputs into their channel slices of an NHCWB16 output: one NHWC, one NHCWB16, one
    requantized (twice its scale); the TE equals the reference's block copies."""
    rng = np.random.default_rng(1)
    ofm = NpuTensor("y", (1, 5, 4, 40), Quant(0.1, 2), layout=Layout.NHCWB16)
    ifms = (
        NpuTensor("a", (1, 5, 4, 8), Quant(0.1, 2)),
        NpuTensor("b", (1, 5, 4, 16), Quant(0.1, 2), layout=Layout.NHCWB16),
        NpuTensor("c", (1, 5, 4, 16), Quant(0.2, -3), layout=Layout.NHCWB16),
    )
    op = Concatenation("y", ifms, ofm, (0, 8, 24))
    values = {t.name: rng.integers(-128, 128, t.shape, dtype=np.int8) for t in ifms}
    stored = {
        role: _stored(values[t.name], t)
        for role, t in zip(("ifm", "ifm2", "ifm3"), ifms, strict=True)
    }
    got = _run_te(op, stored)
    want = run_op(op, dict(values))
    assert np.array_equal(got.transpose(0, 1, 3, 2, 4).reshape(1, 5, 4, 48)[..., :40], want)


def _stored(values: np.ndarray, tensor: NpuTensor) -> np.ndarray:
    """NHWC values in the tensor's stored layout (NHCWB16 bricks zero-padded)."""
    if tensor.layout != Layout.NHCWB16:
        return values
    n, h, w, c = values.shape
    padded = np.zeros((n, h, w, stored_shape(tensor)[2] * 16), values.dtype)
    padded[..., :c] = values
    return padded.reshape(n, h, w, -1, 16).transpose(0, 1, 3, 2, 4).copy()


def test_every_op_of_a_model_has_a_te_compute():
    for function in model_npu_functions(load_tflite(_model("kws_dscnn"))):
        for op in function.ops:
            compute = te_compute(op)
            assert tuple(int(v) for v in compute.output.shape) == stored_shape(feature_map(op.ofm))
            assert "ifm" in compute.inputs


def test_weights_carry_their_encoding_and_the_vela_model_sees_every_block():
    """A part's weight compression and stream bytes give Vela's encoded size of its whole
    weights and of a 16-channel slice (what copying or reading them moves), for the "vela"
    cost model; the tensors keep ratio 1, as the original's "tvm" model counts elements.
    The "vela" model chooses among every valid block config, the "tvm" one among the
    culled list."""
    from cascader.ethosu.weights import encoded_weights
    from cascader.schedule.network import network

    accelerator = "ethos-u55-256"
    net = network(model_npu_functions(load_tflite(_model("kws_dscnn"))), accelerator)
    ratios = []
    more_blocks = 0
    for part in net.graph.parts:
        if not isinstance(part, EthosuPart):
            continue
        assert set(part.block_configs) <= set(part.vela_block_configs)
        more_blocks += len(part.vela_block_configs) > len(part.block_configs)
        if part.weight_tensor_idx < 0:
            continue
        op = net.ops[part.id]
        assert part.inputs[part.weight_tensor_idx].compression_ratio == 1.0
        depth = op.ofm.shape[3]
        per_channel = op.weights.size // depth
        for channels in {depth, min(depth, 16)}:
            encoded = len(encoded_weights(accelerator, op, 0, channels, 16))
            model = part.weight_compression * per_channel * channels + part.weight_stream_bytes
            assert model == pytest.approx(encoded, abs=1)
        ratios.append(part.weight_compression)
    assert more_blocks > 5
    assert max(ratios) > 1.2


def test_a_pad_stays_unlaid_through_graph_json(tmp_path):
    # A pad fills its whole output before its stripes, so no output may be laid over
    # an input it reads; a graph study read from JSON must know that as the model's does.
    model = tmp_path / "chain.tflite"
    model.write_bytes(chain().build())
    graph = build_cascader_graph(model_npu_functions(load_tflite(model)))
    unlaid = [p.id for p in graph.parts if not p.rows_outermost]
    assert unlaid and all(graph.parts[i].op == "identity" for i in unlaid)
    memory = system_memory("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram", 65536)
    path = tmp_path / "chain.json"
    save_graph(graph_document(graph, memory), path)
    loaded = load_graph(path).graph
    assert [p.id for p in loaded.parts if not p.rows_outermost] == unlaid

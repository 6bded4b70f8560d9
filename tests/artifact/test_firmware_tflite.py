"""`<model>_dse.tflite` is laid out as Vela 5.2 lays out `<model>_vela.tflite`: compared field
by field with Vela's own output of the same model (its default core) — operator codes, the
operators and the roles, types and shapes of their tensors, which tensors hold data, the
metadata and which tensors the offline allocation places — on every shared model and on
builder models with host operators between NPU functions, on Ethos-U55 and Ethos-U65."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema
from ethosu.vela import vela
from sessions import compile_model

from cascader.artifact.firmware_tflite import OFFLINE_ALLOCATION
from cascader.core.options import CascaderOptions
from cascader.testing.networks import host_op
from cascader.testing.shared import shared_dir
from cascader.testing.tflite_builder import ModelBuilder

U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65 = ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")
SHARED = (
    "ad_autoencoder",
    "ic_resnet8",
    "kws_dscnn",
    "vww_mobilenet_v1_025",
    "mobilenet_v2_100_224",
)


def two_functions() -> bytes:
    """conv -> (host resize) -> pool + conv: two NPU functions around a host operator."""
    b = ModelBuilder(0, name="two functions")
    x = b.conv2d(b.input((1, 16, 16, 8)), 8, kernel=3)
    b.output(b.conv2d(host_op(b, x), 8, kernel=1))
    return b.build()


def three_functions() -> bytes:
    """Two host operators, a skip across one of them and two model outputs."""
    b = ModelBuilder(1, name="three functions")
    x = b.conv2d(b.input((1, 8, 8, 16)), 16, kernel=3)
    y = b.conv2d(host_op(b, x), 16, kernel=1)
    z = b.add(host_op(b, y), x)
    b.output(b.conv2d(z, 8, kernel=1), y)
    return b.build()


BUILT = {"two_functions": two_functions, "three_functions": three_functions}


def _model(name: str) -> bytes:
    if name in BUILT:
        return BUILT[name]()
    shared = shared_dir()
    if shared is None:
        pytest.skip("../shared is not here")
    return (shared / "models" / f"{name}.tflite").read_bytes()


def _vela(model: bytes, system: tuple[str, str, str], work: Path) -> bytes:
    source = work / "m.tflite"
    source.write_bytes(model)
    argv = [str(source), "--output-dir", str(work / "vela"), "--accelerator-config", system[0]]
    argv += ["--system-config", system[1], "--memory-mode", system[2]]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert vela.main(argv) == 0
    return (work / "vela" / "m_vela.tflite").read_bytes()


def _ours(model: bytes, system: tuple[str, str, str], work: Path) -> bytes:
    compile_model(model, work / "dse", *system, 4 << 20, CascaderOptions(enable_striping=True))
    return (work / "dse" / "model_dse.tflite").read_bytes()


def _facts(data: bytes) -> dict:
    """What a firmware build reads of the file, with data buffers as "has data"."""
    tree = schema.ModelT.InitFromPackedBuf(data, 0)
    sub = tree.subgraphs[0]

    def has_data(tid: int) -> bool:
        data = tree.buffers[sub.tensors[tid].buffer].data
        return data is not None and len(data) > 0

    def tensor(tid: int) -> tuple:
        t = sub.tensors[tid]
        q = t.quantization
        quant = None
        if q is not None and q.scale is not None:
            quant = (tuple(np.float32(q.scale)), tuple(int(z) for z in q.zeroPoint))
        return (t.name, tuple(t.shape), t.type, has_data(tid), quant)

    codes = [(c.builtinCode, c.customCode, c.version) for c in tree.operatorCodes]
    operators = [
        (
            codes[op.opcodeIndex],
            [tensor(int(t)) for t in op.inputs],
            [tensor(int(t)) for t in op.outputs],
            None if op.customOptions is None else list(op.customOptions),
            op.customOptionsFormat,
        )
        for op in sub.operators
    ]
    metadata = [m.name for m in tree.metadata]
    allocation = next(m for m in tree.metadata if m.name == OFFLINE_ALLOCATION)
    words = np.frombuffer(bytes(tree.buffers[allocation.buffer].data), "<i4")
    return {
        "codes": codes,
        "operators": operators,
        "inputs": [tensor(int(t)) for t in sub.inputs],
        "outputs": [tensor(int(t)) for t in sub.outputs],
        "tensors": len(sub.tensors),
        "buffers": len(tree.buffers),
        "empty_buffer_0": tree.buffers[0].data is None or len(tree.buffers[0].data) == 0,
        "metadata": metadata,
        "allocation_header": words[:3].tolist(),
        "planned": [t.name for t, word in zip(sub.tensors, words[3:], strict=True) if word >= 0],
        "signatures": [
            (s.signatureKey, [t.tensorIndex for t in s.inputs], [t.tensorIndex for t in s.outputs])
            for s in tree.signatureDefs or []
        ],
    }


def _without_sizes(facts: dict) -> dict:
    """Command streams, constants and arenas are sized by the schedule: ours is not Vela's."""
    sized = {b"ethos_u_command_stream", b"read_only", b"scratch", b"scratch_fast"}

    def strip(t: tuple) -> tuple:
        return (t[0], None, *t[2:]) if t[0] in sized else t

    operators = [
        (code, [strip(t) for t in ins], [strip(t) for t in outs], options, fmt)
        for code, ins, outs, options, fmt in facts["operators"]
    ]
    return {**facts, "operators": operators}


CASES = [
    *[(name, U55) for name in SHARED],
    ("kws_dscnn", U65),
    ("ic_resnet8", U65),
    ("two_functions", U55),
    ("two_functions", U65),
    ("three_functions", U55),
]


@pytest.mark.parametrize(("name", "system"), CASES, ids=[f"{n}-{s[0][6:9]}" for n, s in CASES])
def test_our_file_is_laid_out_as_velas(name: str, system: tuple, tmp_path: Path) -> None:
    model = _model(name)
    theirs = _facts(_vela(model, system, tmp_path))
    ours = _facts(_ours(model, system, tmp_path))
    assert _without_sizes(ours) == _without_sizes(theirs)


def test_every_npu_tensor_is_placed_where_its_command_stream_reads_it(tmp_path: Path) -> None:
    """The allocation places each NPU operator's IFMs and OFMs at the arena addresses the
    manifest lists, and the scratch tensors at the arena's start."""

    model = three_functions()
    _ours(model, U55, tmp_path)
    manifest = json.loads((tmp_path / "dse" / "manifest.json").read_text())
    tree = schema.ModelT.InitFromPackedBuf((tmp_path / "dse" / "model_dse.tflite").read_bytes(), 0)
    sub = tree.subgraphs[0]
    allocation = next(m for m in tree.metadata if m.name == OFFLINE_ALLOCATION)
    offsets = np.frombuffer(bytes(tree.buffers[allocation.buffer].data), "<i4")[3:]
    arena = {row["address"] for row in manifest["io"]}
    for op in sub.operators:
        if tree.operatorCodes[op.opcodeIndex].customCode != b"ethos-u":
            continue
        assert offsets[op.inputs[2]] == offsets[op.inputs[3]] == 0
        for tid in [*op.inputs[4:], *op.outputs]:
            assert offsets[tid] in arena
    assert len(sub.operators) == 5  # three NPU operators, two host resizes

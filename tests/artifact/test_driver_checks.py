"""The files we ship would be run on a device: Arm's Ethos-U driver and TensorFlow Lite Micro's
kernel accept our `_dse.tflite` as they accept Vela's `_vela.tflite` (command stream and every
base address 16-byte aligned, payload framing and sizes as the driver reads them), on builder
networks and the shared models, Ethos-U55 and Ethos-U65; and the checks do refuse what the
driver refuses."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import flatbuffers
import pytest
from ai_edge_litert import schema_py_generated as schema
from test_firmware_tflite import SHARED, U55, U65, _model, _ours, _vela

from cascader.simulator import FindingKind, driver_refusals
from cascader.testing.architectures import ds_cnn, unet
from cascader.testing.networks import CATALOGUE
from cascader.testing.shared import shared_dir
from dse.cli import main

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

BUILT = ["two_functions", "three_functions", "chain", "branches", "residual", "concat_skip",
         "mobilenet_like", "SOFTMAX", "TRANSPOSE_CONV", "unet_32", "ds_cnn"]  # fmt: skip
EXTRA = {"unet_32": lambda: unet(size=32).build(), "ds_cnn": lambda: ds_cnn().build()}


def _built(name: str) -> bytes:
    if name in EXTRA:
        return EXTRA[name]()
    return CATALOGUE[name]().build() if name in CATALOGUE else _model(name)


def _messages(data: bytes) -> list[str]:
    return [str(f) for f in driver_refusals(data)]


@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
@pytest.mark.parametrize("name", BUILT)
def test_driver_accepts_ours_and_velas(name: str, system: tuple, tmp_path: Path) -> None:
    model = _built(name)
    assert _messages(_vela(model, system, tmp_path)) == []
    assert _messages(_ours(model, system, tmp_path)) == []


@pytest.mark.parametrize("system", [U55, U65], ids=["u55", "u65"])
@pytest.mark.parametrize("name", SHARED)
def test_dse_compile_of_each_shared_model_passes_the_driver(
    name: str, system: tuple, tmp_path: Path
) -> None:
    shared = shared_dir()
    if shared is None:
        pytest.skip("../shared is not here")
    model = shared / "models" / f"{name}.tflite"
    argv = ["compile", "--model", str(model), "--sram", "1MiB", "-o", str(tmp_path / "build")]
    argv += ["--accelerator-config", system[0], "--system-config", system[1]]
    argv += ["--memory-mode", system[2]]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    ours = (tmp_path / "build" / f"{name}_dse.tflite").read_bytes()
    assert _messages(ours) == []
    assert _messages(_vela(model.read_bytes(), system, tmp_path)) == []


def _repacked(data: bytes, change) -> bytes:
    """The file through the flatbuffers object API (which aligns byte vectors to 4 only),
    after `change` edits its tree."""
    tree = schema.ModelT.InitFromPackedBuf(data, 0)
    change(tree)
    builder = flatbuffers.Builder(1024)
    builder.Finish(tree.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _unchanged(tree: schema.ModelT) -> None:
    """Only repacked: what our writer did before it aligned its buffers."""


def _stream(tree: schema.ModelT) -> schema.BufferT:
    sub = tree.subgraphs[0]
    return tree.buffers[sub.tensors[sub.operators[0].inputs[0]].buffer]


def _bad_fourcc(tree: schema.ModelT) -> None:
    buffer = _stream(tree)
    buffer.data = [buffer.data[0] ^ 0xFF, *buffer.data[1:]]


def _cut_payload(tree: schema.ModelT) -> None:
    buffer = _stream(tree)
    buffer.data = buffer.data[: len(buffer.data) // 2 // 4 * 4]


def _read_only_size(tree: schema.ModelT) -> None:
    sub = tree.subgraphs[0]
    sub.tensors[sub.operators[0].inputs[1]].shape = [1]


def _odd_offset(tree: schema.ModelT) -> None:
    entry = next(m for m in tree.metadata if m.name == b"OfflineMemoryAllocation")
    words = bytearray(bytes(tree.buffers[entry.buffer].data))
    ifm = tree.subgraphs[0].operators[0].inputs[4]
    words[12 + 4 * ifm : 16 + 4 * ifm] = (4).to_bytes(4, "little", signed=True)
    tree.buffers[entry.buffer].data = list(words)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_unchanged, "past a multiple of 16"),
        (_bad_fourcc, 'fourcc "COP1"'),
        (_cut_payload, "COMMAND_STREAM action of"),
        (_read_only_size, "its shape gives the driver 1 bytes"),
        (_odd_offset, "at arena offset 4"),
    ],
    ids=["object-api", "fourcc", "cut-payload", "read-only-size", "io-offset"],
)
def test_the_checks_refuse_what_the_driver_refuses(change, message: str, tmp_path: Path) -> None:
    ours = _ours(_model("two_functions"), U55, tmp_path)
    refusals = driver_refusals(_repacked(ours, change))
    assert refusals and all(f.kind == FindingKind.DRIVER_REFUSAL for f in refusals)
    assert any(message in str(f) for f in refusals), [str(f) for f in refusals]

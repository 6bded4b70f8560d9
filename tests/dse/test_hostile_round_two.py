"""Issue 43's second hostile-input round: each case that gave a traceback or a misleading line
now gets one line naming the problem, exit 2, and nothing stored changes. (Exports over what
they did not write: `test_output_safety`; graph JSON numbers and cycles: `tests/core`.)"""

from __future__ import annotations

import contextlib
import io
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema
from ethosu.vela import vela

from cascader.simulator import SimulationError, VelaModel, run_vela_tflite
from cascader.testing.networks import CATALOGUE
from dse.cli import main
from dse.study import close_storages

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out


def _one_line(capsys: pytest.CaptureFixture[str], code: int, words: str) -> None:
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and words in err[0], err


def _vela(model: bytes, tmp_path: Path, accelerator: str = "ethos-u55-256") -> Path:
    (tmp_path / "m.tflite").write_bytes(model)
    argv = [str(tmp_path / "m.tflite"), "--output-dir", str(tmp_path), "--accelerator-config"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert vela.main([*argv, accelerator]) == 0
    return tmp_path / "m_vela.tflite"


def _retyped(tmp_path: Path, pick: Callable[[schema.ModelT], int], kind: int) -> Path:
    """A builder network with the tensor `pick` names retyped to `kind` in the file."""
    tree = schema.ModelT.InitFromPackedBuf(CATALOGUE["chain"]().build(), 0)
    tree.subgraphs[0].tensors[pick(tree)].type = kind
    builder = flatbuffers.Builder(1024)
    builder.Finish(tree.Pack(builder), file_identifier=b"TFL3")
    model = tmp_path / "retyped.tflite"
    model.write_bytes(bytes(builder.Output()))
    return model


def _swept(tmp_path: Path, out: Path) -> tuple[list[str], Path]:
    """A two-trial study of a builder network in `out`: the sweep's command line (without
    --trials) and the study database."""
    model = tmp_path / "chain.tflite"
    model.write_bytes(CATALOGUE["chain"]().build())
    argv = ["sweep", "--model", str(model), "--out", str(out), "--study", "N"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([*argv, "--trials", "2"]) == 0
    return argv, out / "study.db"


def test_weights_that_are_not_int8_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def first_weights(tree: schema.ModelT) -> int:
        conv = next(
            op
            for op in tree.subgraphs[0].operators
            if tree.operatorCodes[op.opcodeIndex].builtinCode == schema.BuiltinOperator.CONV_2D
        )
        return conv.inputs[1]

    model = _retyped(tmp_path, first_weights, schema.TensorType.UINT8)
    code = main(["estimate", "--model", str(model), "--sram", "256KiB"])
    _one_line(capsys, code, "its weights are uint8; quantize the model with int8 weights")


def test_flipped_stream_bytes_are_findings_not_huge_arrays(tmp_path: Path) -> None:
    """Eight random bytes of a Vela command stream changed, many times over: the simulator
    bounds what the registers ask for by the memory it has (a DMA length once asked numpy
    for 5.5 TiB) and reports a finding or a SimulationError, never anything else."""
    parsed = VelaModel.parse(_vela(CATALOGUE["mobilenet_like"]().build(), tmp_path).read_bytes())
    op = next(o for o in parsed.operators if o.kind == "ethos-u")
    payload = parsed.tensors[op.inputs[0]].data
    assert payload is not None
    rng = np.random.default_rng(43)
    inputs = [
        rng.integers(-128, 128, parsed.tensors[i].shape).astype(parsed.tensors[i].dtype)
        for i in parsed.inputs
    ]
    bounded = 0
    for _ in range(60):
        damaged = bytearray(payload)
        for at in rng.integers(32, len(damaged), 8):
            damaged[at] = rng.integers(0, 256)
        try:
            result = run_vela_tflite(parsed, inputs, command_streams={op.index: bytes(damaged)})
        except SimulationError:
            continue
        bounded += any("bytes all regions hold" in str(f) for f in result.findings)
    assert bounded > 0


def test_a_compiled_file_given_as_the_reference_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    compiled = _vela(CATALOGUE["chain"]().build(), tmp_path)
    code = main(["simulate", "--model", str(compiled), "--reference", str(compiled)])
    _one_line(capsys, code, "is itself compiled (it has ethos-u operators)")


def test_an_ethos_u85_stream_is_said_not_to_be_simulated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = CATALOGUE["chain"]().build()
    compiled = _vela(model, tmp_path, "ethos-u85-256")
    code = main(["simulate", "--model", str(compiled), "--reference", str(tmp_path / "m.tflite")])
    _one_line(capsys, code, "is for an Ethos-U85, which the simulator does not run")


def test_a_study_whose_row_was_deleted_is_refused_and_left_as_it_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv, database = _swept(tmp_path, tmp_path / "S")
    with contextlib.closing(sqlite3.connect(database)) as connection:
        connection.execute("DELETE FROM studies")
        connection.commit()
    before = database.read_bytes()
    capsys.readouterr()
    code = main([*argv, "--trials", "2"])
    _one_line(capsys, code, "a study whose own row is missing (a damaged database)")
    assert database.read_bytes() == before


def test_an_empty_model_name_is_named_as_such(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:  # argparse's exit, in one line
        main(["estimate", "--model", "", "--sram", "64KiB"])
    _one_line(capsys, int(str(exited.value.code)), "the file name is empty")


def test_a_study_with_an_unknown_accelerator_is_not_exported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, database = _swept(tmp_path, tmp_path / "S")
    with contextlib.closing(sqlite3.connect(database)) as connection:
        (value,) = connection.execute(
            "SELECT value_json FROM study_user_attributes WHERE key = 'dse.settings'"
        ).fetchone()
        connection.execute(
            "UPDATE study_user_attributes SET value_json = ? WHERE key = 'dse.settings'",
            (value.replace("ethos-u55-256", "ethos-u99-1"),),
        )
        connection.commit()
    capsys.readouterr()
    code = main(["export", "--storage", f"sqlite:///{database}", "--study", "N", "--max-sram",
                 "256KiB", "-o", str(tmp_path / "cfg.json")])  # fmt: skip
    _one_line(capsys, code, "accelerator: must be one of")
    assert not (tmp_path / "cfg.json").exists()


def test_a_string_input_is_refused_before_tvm_sees_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """TVM's own warning line used to come before the refusal."""
    model = _retyped(tmp_path, lambda tree: tree.subgraphs[0].inputs[0], schema.TensorType.STRING)
    code = main(["estimate", "--model", str(model), "--sram", "64KiB"])
    _one_line(capsys, code, "is of type STRING; give an int8 model")


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """An 8 MiB tmpfs (root only), unmounted afterwards."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield folder
    finally:
        close_storages()  # the study's connections hold its file open
        subprocess.run(["umount", "--lazy", str(folder)], check=False)


def test_a_full_disk_is_named_and_the_study_is_kept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tiny_disk: Path
) -> None:
    argv, database = _swept(tmp_path, tiny_disk / "S")
    before = database.read_bytes()
    with open(tiny_disk / "filler", "wb") as filler, contextlib.suppress(OSError):
        while True:
            filler.write(bytes(1 << 16))
            filler.flush()
    capsys.readouterr()
    code = main([*argv, "--trials", "4"])
    _one_line(capsys, code, f"the disk holding {database} is full")
    assert database.read_bytes() == before

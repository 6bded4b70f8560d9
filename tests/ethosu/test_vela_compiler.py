"""Vela's C++ core called in process (`vela_compiler`) against the `vela` command line its
options stand for: the same bytes, the same summary, every time; and bad settings refused."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from ethosu.vela.architecture_features import Accelerator
from ethosu.vela.nn_graph import TensorAllocator

from cascader.ethosu.defaults import system_defaults
from cascader.ethosu.errors import DeviceConfigError
from cascader.ethosu.vela_arch import (
    DEFAULT_VELA_INI,
    VELA_ACCELERATORS,
    VelaConfigError,
    check_vela_system,
    system_configs,
)
from cascader.ethosu.vela_compiler import (
    ALLOCATORS,
    FEATURES,
    VelaCompiled,
    VelaError,
    VelaOptions,
    compile_model,
)
from cascader.frontend.tflite_check import parse_tflite
from cascader.testing.networks import mobilenet_like
from cascader.testing.shared import shared_dir

SHARED = shared_dir()
KWS = SHARED / "models" / "kws_dscnn.tflite" if SHARED is not None else None

U55 = VelaOptions(
    "ethos-u55-256",
    "Ethos_U55_High_End_Embedded",
    "Shared_Sram",
    arena_size_limit=64 << 10,
    optimise="Performance",
    disabled=("WeightBuffering",),
)
U85 = VelaOptions(
    "ethos-u85-256",
    *system_defaults("ethos-u85-256", None, None),
    arena_size_limit=128 << 10,
    optimise="Size",
)
POINTS = {"u55": U55, "u85": U85}
U55_SYSTEM = ("Ethos_U55_High_End_Embedded", "Shared_Sram")
# The summary CSV's name of each memory area (perf.AREAS spelling -> Vela's identifier).
CSV_AREAS = {"sram": "sram", "dram": "dram", "onchip_flash": "on_chip_flash",
             "offchip_flash": "off_chip_flash"}  # fmt: skip


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small builder network (always) and the shared KWS model (when the folder is there)."""
    path = tmp_path_factory.mktemp("models") / "mobilenet_like_32.tflite"
    path.write_bytes(mobilenet_like((32, 32, 3)).build())
    found = {"builder": path}
    if KWS is not None and KWS.is_file():
        found["kws_dscnn"] = KWS
    return found


@pytest.fixture(scope="module")
def vela_cli(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[Path, VelaOptions], tuple[bytes, dict[str, str]]]:
    """Run the `vela` command line an option set gives (once per model and options): the
    _vela.tflite it writes and its summary CSV row."""
    runs: dict[tuple[Path, VelaOptions], tuple[bytes, dict[str, str]]] = {}

    def run(model: Path, options: VelaOptions) -> tuple[bytes, dict[str, str]]:
        if (model, options) not in runs:
            out = tmp_path_factory.mktemp("vela")
            argv = options.command_line(model, out)
            assert argv[0] == "vela"
            done = subprocess.run(
                [sys.executable, "-m", "ethosu.vela", *argv[1:]],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            with (out / f"{model.stem}_summary_{options.system_config}.csv").open() as f:
                row = next(csv.DictReader(f))
            runs[model, options] = (out / f"{model.stem}_vela.tflite").read_bytes(), row
        return runs[model, options]

    return run


def _model(models: dict[str, Path], name: str) -> Path:
    if name not in models:
        pytest.skip("shared/models not available")
    return models[name]


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("name", ["builder", "kws_dscnn"])
def test_the_bytes_are_the_ones_the_vela_command_line_writes(models, vela_cli, name, point):
    model, options = _model(models, name), POINTS[point]
    tflite, _ = vela_cli(model, options)
    assert compile_model(model, options).tflite == tflite


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("name", ["builder", "kws_dscnn"])
def test_the_totals_are_the_command_lines_summary(models, vela_cli, name, point):
    model, options = _model(models, name), POINTS[point]
    _, row = vela_cli(model, options)
    compiled = compile_model(model, options)
    assert compiled.total_cycles == float(row["cycles_total"])
    assert compiled.npu_cycles == float(row["cycles_npu"])
    assert compiled.sram_used_bytes == round(float(row["sram_memory_used"]) * 1024)
    assert compiled.macs == int(row["nn_macs"])
    for area, column in CSV_AREAS.items():
        assert compiled.access_bytes.get(area, 0.0) == float(row[f"{column}_total_bytes"])
    for area in ("dram", "offchip_flash"):
        used = round(float(row[f"{CSV_AREAS[area]}_memory_used"]) * 1024)
        assert compiled.peak_bytes.get(area, 0) == used
    assert compiled.npu_ops > 0
    assert compiled.cpu_ops == 0


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("name", ["builder", "kws_dscnn"])
def test_the_per_layer_report_adds_up_to_the_totals(models, name, point):
    """Vela's per-layer report (what --verbose-performance prints) covers the whole inference:
    its operations' cycles and MACs sum to the totals, each tied to a TFLite operator (an
    operator fused into another's operation has none of its own); every layer of cycles has
    a command regor's queue table records."""
    model, options = _model(models, name), POINTS[point]
    compiled = compile_model(model, options)
    operators = parse_tflite(model.read_bytes(), name).Subgraphs(0).OperatorsLength()
    assert compiled.layers
    assert sum(layer.cycles for layer in compiled.layers) == compiled.total_cycles
    assert sum(layer.macs for layer in compiled.layers) == compiled.macs
    assert {layer.tflite_index for layer in compiled.layers} <= set(range(operators))
    queued = {command.layer for command in compiled.commands}
    assert {k for k, layer in enumerate(compiled.layers) if layer.cycles} <= queued
    assert queued <= set(range(len(compiled.layers)))


def test_constants_kept_in_sram_are_reported_apart_as_vela_does(models, vela_cli):
    """Sram_Only keeps the weights in the SRAM too: regor's SRAM peak counts them, Vela's
    summary moves them to on-chip flash; a vela.ini given by path is passed on as that path."""
    ini = models["builder"].parent / "my_vela.ini"
    shutil.copyfile(DEFAULT_VELA_INI, ini)
    options = VelaOptions(
        "ethos-u55-128",
        "Ethos_U55_Deep_Embedded",
        "Sram_Only",
        config_path=str(ini),
        tensor_allocator="LinearAlloc",
        disabled=("ReuseIFM", "Cascading"),
    )
    tflite, row = vela_cli(models["builder"], options)
    compiled = compile_model(models["builder"], options)
    assert compiled.tflite == tflite
    assert compiled.sram_used_bytes == round(float(row["sram_memory_used"]) * 1024)
    assert 0 < compiled.sram_used_bytes < compiled.peak_bytes["sram"]


def test_a_compile_is_deterministic_and_takes_bytes_or_a_path(models):
    first = compile_model(models["builder"], U85)
    other = compile_model(models["builder"], U55)  # nothing of one compile stays for the next
    again = compile_model(models["builder"].read_bytes(), U85)
    assert isinstance(first, VelaCompiled)
    assert again == first
    assert again.tflite == first.tflite
    assert compile_model(models["builder"], U55) == other


def test_a_compile_prints_nothing(models, capfd):
    """Vela's config reading prints an Info line for Sram_Only, and regor writes its own
    complaints through C's stdio (here: an allocator it does not know, which VelaOptions
    itself refuses, set behind its back); none of it reaches our stdout or stderr."""
    compile_model(
        models["builder"], VelaOptions("ethos-u85-512", "Ethos_U85_SYS_Flash_High", "Sram_Only")
    )
    greedy = VelaOptions("ethos-u55-256", *U55_SYSTEM)
    object.__setattr__(greedy, "tensor_allocator", "Greedy")
    compile_model(models["builder"], greedy)
    assert capfd.readouterr() == ("", "")


@pytest.mark.parametrize("arena_kib", [8, 16, 32])
def test_a_dedicated_sram_arena_cache_is_a_hard_cap(models, arena_kib):
    options = VelaOptions(
        "ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram", arena_size_limit=arena_kib << 10
    )
    compiled = compile_model(models["builder"], options)
    assert 0 < compiled.sram_used_bytes <= options.arena_size_limit
    assert compiled.peak_bytes["dram"] > 0


def _one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


def test_an_unknown_accelerator_lists_every_one_vela_knows(models):
    with pytest.raises(DeviceConfigError, match="accelerator config") as err:
        compile_model(models["builder"], VelaOptions("ethos-u99-256", *U55_SYSTEM))
    assert all(name in _one_line(err) for name in VELA_ACCELERATORS)


def test_a_system_config_of_another_family_is_refused_with_this_familys(models):
    with pytest.raises(VelaConfigError, match="is for the Ethos-U55, not the ethos-u85-256") as err:
        compile_model(
            models["builder"],
            VelaOptions("ethos-u85-256", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
        )
    ours = [c for c in system_configs(DEFAULT_VELA_INI) if c.startswith("Ethos_U85_")]
    assert ours and all(name in _one_line(err) for name in ours)


def test_unknown_choices_are_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="feature 'Chaining'") as err:
        VelaOptions(
            "ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram", disabled=("Chaining",)
        )
    assert all(name in _one_line(err) for name in FEATURES)
    with pytest.raises(ValueError, match="tensor allocator 'Greedy'") as err:
        VelaOptions(
            "ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram", tensor_allocator="Greedy"
        )
    assert all(name in _one_line(err) for name in ALLOCATORS)
    with pytest.raises(ValueError, match="optimise strategy 'Speed'"):
        VelaOptions("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram", optimise="Speed")


def test_what_is_not_a_model_is_refused_before_regor_sees_it():
    with pytest.raises(VelaError, match="not a TFLite"):
        compile_model(b"not a model at all", U55)


def test_options_are_normalised_and_name_vela_s_own_flags(tmp_path):
    options = VelaOptions(
        "ethos-u55-256",
        "Ethos_U55_High_End_Embedded",
        "Shared_Sram",
        disabled=("ReuseIFM", "Grouping", "Cascading", "Grouping"),
    )
    assert options.disabled == ("Cascading", "Grouping", "ReuseIFM")
    assert options == VelaOptions(
        "ethos-u55-256",
        "Ethos_U55_High_End_Embedded",
        "Shared_Sram",
        disabled=("Cascading", "ReuseIFM", "Grouping"),
    )
    argv = options.command_line("m.tflite", tmp_path)
    assert argv[:2] == ["vela", "m.tflite"]
    assert argv[argv.index("--config") + 1] == "Arm/vela.ini"
    assert "--arena-cache-size" not in argv
    assert argv[-5:] == [
        "--disable-cascading",
        "--disable-chaining",
        "--disable-ifm-reuse",
        "--output-dir",
        str(tmp_path),
    ]


def test_the_lists_are_vela_s():
    assert tuple(Accelerator.member_list()) == VELA_ACCELERATORS
    assert ALLOCATORS[0] == TensorAllocator.HillClimb.name
    assert set(ALLOCATORS) <= {a.name for a in TensorAllocator}
    assert system_defaults("ethos-u85-1024", None, None) == (
        "Ethos_U85_SYS_DRAM_Mid",
        "Dedicated_Sram_384KB",
    )
    arch = check_vela_system("ethos-u85-2048", *system_defaults("ethos-u85-2048", None, None))
    assert (arch.num_macs_per_cycle, arch.arena_cache_size) == (2048, 384 << 10)

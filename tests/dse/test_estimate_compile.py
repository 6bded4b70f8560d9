"""`dse estimate` and `dse compile` on the example model and builder models: the estimate
object of DESIGN.md, cascader on/off and striping on/off, infeasible pools, written files."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
from sessions import estimate

from cascader.core.options import CascaderOptions
from cascader.testing.architectures import (
    build_cached,
    ds_cnn,
    efficientnet_b0_like,
    mobilenet_v1,
    mobilenet_v2,
    person_detection,
    resnet50_like,
    unet,
)
from cascader.testing.networks import CATALOGUE
from cascader.testing.shared import shared_dir
from dse.cli import main
from dse.sizes import parse_size
from dse.space import SMALLEST, DesignPoint

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
KEYS = {
    "model", "model_sha256", "accelerator", "system_config", "memory_mode", "sram_pool_bytes",
    "cascader", "fits", "sram_used_bytes", "total_cycles", "npu_cycles", "macs",
    "inference_time_s", "bytes", "npu_ops", "host_ops", "ops", "producer",
    "sram_lower_bound_bytes", "sram_lower_bound_derivation",
}  # fmt: skip


def _estimate(capsys: pytest.CaptureFixture[str], *flags: str) -> dict:
    code = main(["estimate", "--model", str(EXAMPLE), "--json", *flags])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_estimate_json_is_the_design_object(capsys: pytest.CaptureFixture[str]) -> None:
    data = _estimate(capsys, "--sram", "256KiB")
    assert set(data) == KEYS
    assert data["cascader"]["enabled"] is True
    assert data["cascader"]["options"]["enable_striping"] == 1
    assert data["fits"] and 0 < data["sram_used_bytes"] <= 256 * 1024
    assert set(data["bytes"]) == {"sram", "dram", "offchip_flash", "onchip_flash"}
    assert data["total_cycles"] == pytest.approx(sum(op["cycles"] for op in data["ops"]))
    assert data["macs"] == sum(op["macs"] for op in data["ops"])
    assert data["npu_ops"] == len(data["ops"]) == 67
    assert data["host_ops"] == []
    assert data["inference_time_s"] == pytest.approx(data["total_cycles"] / 500e6)
    op_keys = {"name", "tflite_index", "tflite_op", "kind", "stripes", "cycles", "macs", "bytes"}
    assert set(data["ops"][0]) == op_keys  # names: tests/pipeline/test_tflite_names.py


def test_cascader_and_striping_change_the_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    """Striped cascades fit 160 KiB; whole feature maps (layer by layer, or cascades without
    striping) need more than that: the largest layer's two maps alone take 184,320 bytes."""
    pool = 160 * 1024
    on = _estimate(capsys, "--sram", "160KiB")
    system = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram", pool)
    flat = estimate(str(EXAMPLE), *system, CascaderOptions(enable_striping=False))
    off = estimate(str(EXAMPLE), *system, None)
    assert on["fits"] and on["sram_used_bytes"] <= pool
    assert any(op["stripes"] > 1 for op in on["ops"])
    for whole in (flat, off):
        assert not whole.fits and whole.sram_used_bytes > pool
    # no spatial striping without it (copy-constants may still slice big weights by depth)
    assert all(op["stripes"] == 1 for op in flat.to_json()["ops"])
    assert off.to_json()["cascader"] == {"enabled": False, "options": {}, "buffer_weights": True}
    assert on["macs"] == off.macs == flat.macs


def test_nothing_fits_exits_3_with_the_smallest_need(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["estimate", "--model", str(EXAMPLE), "--sram", "32KiB", "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3
    assert len(err) == 1
    assert "nothing fits in 32768 bytes; the smallest schedule needs" in err[0]
    needed = int(err[0].split("needs ")[1].split()[0])
    bound = int(err[0].split("could need less than ")[1].rstrip(")"))
    assert needed > 32768 and 0 < bound <= needed


def test_the_table_ends_with_the_lower_bound(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--model", str(EXAMPLE), "--sram", "1MiB"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("SRAM lower bound 27.0 KiB (no schedule of this model needs less on ")
    assert "beside input_0 (27,648 B) held whole" in last


def test_infeasible_points_are_scores_not_errors_for_the_library() -> None:
    result = estimate(EXAMPLE, "ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram",
                      32 * 1024, CascaderOptions(enable_striping=True))  # fmt: skip
    assert not result.fits
    assert result.sram_used_bytes > 32 * 1024
    assert result.total_cycles > 0


def test_a_bigger_pool_never_needs_more_cycles(capsys: pytest.CaptureFixture[str]) -> None:
    small = _estimate(capsys, "--sram", "200KiB", "--no-cascade")
    big = _estimate(capsys, "--sram", "1MiB", "--no-cascade")
    assert big["total_cycles"] <= small["total_cycles"]


def test_u65_defaults_to_dedicated_sram(capsys: pytest.CaptureFixture[str]) -> None:
    data = _estimate(capsys, "--accelerator-config", "ethos-u65-256", "--sram", "128KiB")
    assert (data["system_config"], data["memory_mode"]) == ("Ethos_U65_High_End", "Dedicated_Sram")
    assert data["bytes"]["dram"] > 0
    assert data["fits"] and data["sram_used_bytes"] <= 128 * 1024


@pytest.mark.parametrize("name", ["chain", "residual", "concat_skip", "SOFTMAX"])
@pytest.mark.parametrize("options", [None, CascaderOptions(enable_striping=True)])
def test_builder_models_estimate(name: str, options: CascaderOptions | None) -> None:
    model = CATALOGUE[name]().build()
    result = estimate(model, "ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram",
                      512 * 1024, options)  # fmt: skip
    data = result.to_json()
    assert data["fits"] and data["npu_ops"] > 0 and data["total_cycles"] > 0
    assert data["model"] == "model.tflite"


def test_compile_writes_streams_constants_and_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(["compile", "--model", str(EXAMPLE), "--sram", "256KiB", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    said = capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "cascader-dse-compiled"
    (function,) = manifest["functions"]
    # One vocabulary (issue 42): the function named as its files, its stripes as verify counts
    # them, the same words in what compile prints.
    assert function["name"] == "npu0" and function["command_stream"] == "npu0.cs"
    assert main(["verify", "--model", str(EXAMPLE), "--sram", "256KiB", "--json"]) == 0
    stripes = json.loads(capsys.readouterr().out)["schedule"]["stripes"]
    assert function["stripes"] == stripes and function["dma_copies"] > 0
    layers = len(manifest["estimate"]["ops"])
    assert f"{layers} layers as {stripes} stripes and {function['dma_copies']} DMA copies" in said
    assert (out / function["command_stream"]).stat().st_size > 0
    assert (out / function["driver_payload"]).read_bytes()[:4] == b"COP1"
    assert (out / "constants.bin").stat().st_size == manifest["regions"]["0"]["bytes"]
    assert 0 < manifest["scratch_bytes"] <= 256 * 1024
    kinds = sorted(row["kind"] for row in manifest["io"])
    assert kinds == ["input", "output"]
    assert manifest["estimate"]["fits"]


def test_compile_rebuilds_an_exported_point_exactly(tmp_path: Path, capsys) -> None:
    out = tmp_path / "study"
    sweep = [
        "sweep",
        "--model",
        str(EXAMPLE),
        "--trials",
        "3",
        "--sram-min",
        "192KiB",
        "--sram-max",
        "1MiB",
        "--out",
        str(out),
        "--study",
        "s",
        "--json",
        "--producers",
        "cascader",
    ]  # fmt: skip  (a Vela point's rebuild: test_producers)
    assert main(sweep) == 0
    storage = json.loads(capsys.readouterr().out)["storage"]
    cfg = tmp_path / "cfg.json"
    assert main(["export", "--storage", storage, "--study", "s", "--max-sram", "1MiB",
                 "-o", str(cfg)]) == 0  # fmt: skip
    config = json.loads(cfg.read_text())
    built = tmp_path / "built"
    assert main(["compile", "--model", str(EXAMPLE), "--config", str(cfg), "-o", str(built)]) == 0
    estimate = json.loads((built / "manifest.json").read_text())["estimate"]
    assert estimate["sram_pool_bytes"] == config["sram_pool_bytes"]
    assert round(estimate["total_cycles"]) == config["predicted"]["total_cycles"]
    assert estimate["sram_used_bytes"] == config["predicted"]["sram_used_bytes"]


def test_each_seed_kind_exports_and_rebuilds_exactly(tmp_path: Path, capsys) -> None:
    """The seeds of a new model study: cascader defaults, cascader copying every constant,
    no cascader, and the cascader costing plans like Vela; each exported point compiles back
    to its predicted cycles and SRAM."""
    out = tmp_path / "study"
    sweep = ["sweep", "--model", str(EXAMPLE), "--trials", "16", "--sram-min", "192KiB",
             "--sram-max", "1MiB", "--out", str(out), "--study", "s", "--json",
             "--producers", "cascader"]  # fmt: skip
    assert main(sweep) == 0
    storage = json.loads(capsys.readouterr().out)["storage"]
    kinds = []
    for trial in range(4):
        cfg = tmp_path / f"cfg{trial}.json"
        assert main(["export", "--storage", storage, "--study", "s", "--trial", str(trial),
                     "-o", str(cfg)]) == 0  # fmt: skip
        config = json.loads(cfg.read_text())
        cascader = config["cascader"]
        kinds.append((cascader["enabled"], cascader["options"]["cost_model"]))
        tvm_options = config["snippets"]["tvm"]["target"]["options"]
        assert (tvm_options is not None) is cascader["enabled"]
        built = tmp_path / f"built{trial}"
        assert main(["compile", "--model", str(EXAMPLE), "--config", str(cfg),
                     "-o", str(built)]) == 0  # fmt: skip
        estimate = json.loads((built / "manifest.json").read_text())["estimate"]
        assert estimate["cascader"]["enabled"] is cascader["enabled"]
        if cascader["enabled"]:
            assert estimate["cascader"]["options"]["cost_model"] == kinds[-1][1]
        assert round(estimate["total_cycles"]) == config["predicted"]["total_cycles"]
        assert estimate["sram_used_bytes"] == config["predicted"]["sram_used_bytes"]
    assert kinds == [(True, "tvm"), (True, "tvm"), (False, "tvm"), (True, "vela")]


def test_every_front_point_compiles_in_a_fresh_process_to_its_trials_numbers(
    tmp_path: Path, capsys
) -> None:
    """A sweep's trials share the process's caches (cascader runs, schedules, block choices,
    weight encodes), so a trial's numbers must not depend on what ran before it: each front
    point's exported config, compiled by a new `dse` process, gives its trial's SRAM and
    cycles (a DS-CNN on ethos-u65-256 Dedicated_Sram: cascaded, layer-by-layer and
    weights-in-place points)."""
    model = build_cached("ds_cnn")
    out = tmp_path / "study"
    sweep = ["sweep", "--model", str(model), "--accelerator-config", "ethos-u65-256",
             "--trials", "24", "--seed", "3", "--out", str(out), "--study", "s",
             "--json"]  # fmt: skip
    assert main(sweep) == 0
    result = json.loads(capsys.readouterr().out)
    configs = [row["config"] for row in result["front"]]
    kinds = {(c["enable_cascader"], c["buffer_weights"]) for c in configs}
    assert kinds == {(True, True), (False, True), (False, False)}
    for row in result["front"]:
        cfg = tmp_path / f"cfg{row['trial']}.json"
        assert main(["export", "--storage", result["storage"], "--study", "s",
                     "--trial", str(row["trial"]), "-o", str(cfg)]) == 0  # fmt: skip
        built = tmp_path / f"built{row['trial']}"
        done = subprocess.run(
            [sys.executable, "-m", "dse", "compile", "--model", str(model), "--config", str(cfg),
             "-o", str(built)],
            capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        estimate = json.loads((built / "manifest.json").read_text())["estimate"]
        assert estimate["sram_used_bytes"] == row["sram_used_bytes"]
        assert estimate["total_cycles"] == row["total_cycles"]


def test_a_narrow_nhwc_point_exports_and_rebuilds_exactly(tmp_path: Path, capsys) -> None:
    """A sweep seeds the smallest schedules with narrow feature maps NHWC; that trial's
    exported config says so, and compiles to the same bytes as the point given by flags
    (`--narrow-nhwc`). (Whether bricks need more SRAM at its pool depends on the model: on
    this 32 x 32 MobileNetV2 their chains of laid outputs, turned, pack into less.)"""
    model = tmp_path / "mobilenet_v2.tflite"
    model.write_bytes(mobilenet_v2(size=32, classes=10).build())
    out = tmp_path / "study"
    sweep = ["sweep", "--model", str(model), "--trials", "36", "--sram-min", "1KiB",
             "--sram-max", "256KiB", "--out", str(out), "--study", "s", "--json",
             "--producers", "cascader", "--seed", "3"]  # fmt: skip
    assert main(sweep) == 0
    storage = json.loads(capsys.readouterr().out)["storage"]
    study = optuna.load_study(study_name="s", storage=storage)
    kind = replace(SMALLEST, cost_model="vela", narrow_nhwc=True)
    trial = next(
        t for t in study.trials
        if replace(DesignPoint(**t.user_attrs["config"]), sram_pool_bytes=0) == kind
    )  # fmt: skip
    cfg = tmp_path / "cfg.json"
    assert main(["export", "--storage", storage, "--study", "s", "--trial", str(trial.number),
                 "-o", str(cfg)]) == 0  # fmt: skip
    config = json.loads(cfg.read_text())
    assert config["cascader"]["narrow_nhwc"] is True
    pool = str(config["sram_pool_bytes"])
    flags = ["--sram", pool, "--multi-dimensional-striping", "--stripe-factors", "2",
             "--always-copy-size", "0", "--cost-model", "vela",
             "--proposal-region", str(config["cascader"]["proposal_region_bytes"])]  # fmt: skip
    builds = []
    for name, args in (("config", ["--config", str(cfg)]), ("flags", [*flags, "--narrow-nhwc"])):
        built = tmp_path / name
        assert main(["compile", "--model", str(model), *args, "-o", str(built)]) == 0
        estimate = json.loads((built / "manifest.json").read_text())["estimate"]
        assert estimate["cascader"]["narrow_nhwc"] is True
        assert round(estimate["total_cycles"]) == config["predicted"]["total_cycles"]
        assert estimate["sram_used_bytes"] == config["predicted"]["sram_used_bytes"]
        files = {f.name: f.read_bytes() for f in built.iterdir() if f.name != "manifest.json"}
        builds.append(files)
    assert builds[0] == builds[1]


def test_weights_read_in_place_leave_dedicated_sram_empty(tmp_path: Path, capsys) -> None:
    """On ethos-u65-256 (Dedicated_Sram) the layer-by-layer schedule buffers 12.5 KiB of
    weights; reading them all in place holds nothing in SRAM at some cycles' cost (Vela's
    --optimise Size point of such models is 0 B). A sweep seeds it, its export says so and
    compiles back to the same figures; the flag needs --no-cascade."""
    u65 = ["--accelerator-config", "ethos-u65-256", "--sram", "16KiB"]
    buffered = _estimate(capsys, *u65, "--no-cascade")
    in_place = _estimate(capsys, *u65, "--no-cascade", "--no-weight-buffering")
    assert buffered["sram_used_bytes"] > 0 and in_place["sram_used_bytes"] == 0
    assert in_place["total_cycles"] > buffered["total_cycles"]
    assert in_place["cascader"] == {"enabled": False, "options": {}, "buffer_weights": False}
    assert main(["estimate", "--model", str(EXAMPLE), "--no-weight-buffering"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    out = tmp_path / "study"
    sweep = ["sweep", "--model", str(EXAMPLE), "--accelerator-config", "ethos-u65-256",
             "--trials", "36", "--sram-max", "256KiB", "--out", str(out), "--study", "s",
             "--json"]  # fmt: skip
    assert main(sweep) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["front"][0]["sram_used_bytes"] == 0
    cfg = tmp_path / "cfg.json"
    assert main(["export", "--storage", result["storage"], "--study", "s", "--max-sram", "1KiB",
                 "-o", str(cfg)]) == 0  # fmt: skip
    config = json.loads(cfg.read_text())
    assert config["cascader"]["enabled"] is False
    assert config["cascader"]["buffer_weights"] is False
    built = tmp_path / "built"
    assert main(["compile", "--model", str(EXAMPLE), "--config", str(cfg), "-o", str(built)]) == 0
    estimate = json.loads((built / "manifest.json").read_text())["estimate"]
    assert estimate["sram_used_bytes"] == 0
    assert round(estimate["total_cycles"]) == config["predicted"]["total_cycles"]


def test_cost_model_flag(capsys: pytest.CaptureFixture[str]) -> None:
    vela = _estimate(capsys, "--sram", "256KiB", "--cost-model", "vela")
    assert vela["cascader"]["options"]["cost_model"] == "vela" and vela["fits"]
    with pytest.raises(SystemExit) as exit_info:
        main(["estimate", "--model", str(EXAMPLE), "--cost-model", "bogus"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'bogus'" in capsys.readouterr().err


def test_compile_refuses_a_corrupt_config_in_one_line(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text("{not json")
    code = main(["compile", "--model", str(EXAMPLE), "--config", str(cfg), "-o", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not valid JSON" in err[0]


def test_compile_nothing_fits_exits_3(tmp_path: Path, capsys) -> None:
    code = main(["compile", "--model", str(EXAMPLE), "--sram", "16KiB", "-o", str(tmp_path / "o")])
    assert code == 3
    assert "nothing fits in 16384 bytes" in capsys.readouterr().err


def test_estimate_bad_inputs_exit_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a model")
    assert main(["estimate", "--model", str(bad)]) == 2
    assert main(["estimate", "--model", str(EXAMPLE), "--accelerator-config", "ethos-u99"]) == 2
    assert main(["estimate"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "exactly one of --model" in err[2]


def test_estimate_a_graph_with_the_cascaders_cost(tmp_path: Path, capsys) -> None:
    graph = tmp_path / "g.json"
    assert main(["graph", "--model", str(EXAMPLE), "-o", str(graph)]) == 0
    capsys.readouterr()
    assert main(["estimate", "--graph", str(graph), "--sram", "256KiB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["scored_by"] == "cascader" and data["fits"]
    assert main(["estimate", "--graph", str(graph), "--no-cascade"]) == 2
    assert "--no-cascade needs --model" in capsys.readouterr().err


def test_a_reshape_between_model_input_and_output_compiles_to_a_copy(tmp_path: Path) -> None:
    """The runtime owns both buffers, so the NPU copies the bytes (as Vela does)."""
    model = tmp_path / "reshape.tflite"
    model.write_bytes(CATALOGUE["RESHAPE"]().build())
    out = tmp_path / "build"
    assert main(["compile", "--model", str(model), "--sram", "256KiB", "-o", str(out)]) == 0
    assert (out / "npu0.cs").stat().st_size > 0 and (out / "npu0.payload").stat().st_size > 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(row["kind"] for row in manifest["io"]) == ["input", "output"]
    assert main(["verify", "--model", str(model), "--sram", "256KiB"]) == 0


def _cli_estimate(capsys: pytest.CaptureFixture[str], model: Path, *flags: str) -> tuple[int, dict]:
    code = main(["estimate", "--model", str(model), "--json", *flags])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else {})


# The architectures users bring, at sizes a unit test can afford (the full ones are measured by
# benchmarks/quality_vs_vela.py --architectures).
_SMALL_ARCHITECTURES = {
    "unet": lambda: unet(size=32),
    "efficientnet": lambda: efficientnet_b0_like(size=32, classes=10),
    "resnet50": lambda: resnet50_like(size=32, classes=10),
    "mobilenet_v1": lambda: mobilenet_v1(size=32, classes=10),
    "ds_cnn": ds_cnn,
    "mobilenet_v2_035": lambda: mobilenet_v2(size=32, classes=10),
    "person_detection": lambda: person_detection(size=48),
}


@pytest.mark.parametrize(
    ("name", "pool"),
    [
        ("example", "96KiB"),
        ("example", "4MiB"),
        ("chain", "16KiB"),
        ("residual", "64KiB"),
        *((name, "4MiB") for name in _SMALL_ARCHITECTURES),  # the slow case
        *((name, "16KiB") for name in ("unet", "mobilenet_v1", "ds_cnn")),
    ],
)
def test_a_point_without_option_flags_is_never_slower_than_the_cascader_off(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, pool: str
) -> None:
    """With no option flags a point command takes the best of a sweep's seed kinds, so it
    fits wherever the cascader off fits and is never slower there."""
    model = EXAMPLE
    if name != "example":
        model = tmp_path / f"{name}.tflite"
        model.write_bytes((_SMALL_ARCHITECTURES.get(name) or CATALOGUE[name])().build())
    code, best = _cli_estimate(capsys, model, "--sram", pool)
    off_code, off = _cli_estimate(capsys, model, "--sram", pool, "--no-cascade")
    if off_code == 0:
        assert code == 0 and best["total_cycles"] <= off["total_cycles"]
    if code == 0:
        assert best["fits"] and best["sram_used_bytes"] <= parse_size(pool)


def test_option_flags_still_pin_the_point(capsys: pytest.CaptureFixture[str]) -> None:
    pinned = _estimate(capsys, "--sram", "4MiB", "--cost-model", "tvm")
    assert pinned["cascader"]["enabled"] and pinned["cascader"]["options"]["cost_model"] == "tvm"
    assert pinned["cascader"]["options"]["always_copy_size"] == 1024


def test_mobilenet_v2_fits_256_kib_without_flags(capsys: pytest.CaptureFixture[str]) -> None:
    shared = shared_dir()
    if shared is None:
        pytest.skip("../shared is not here")
    code, data = _cli_estimate(capsys, shared / "models" / "mobilenet_v2_100_224.tflite",
                               "--sram", "256KiB")  # fmt: skip
    assert code == 0 and data["fits"] and data["sram_used_bytes"] <= 256 * 1024

"""`dse export` and `load_config`: selection rules, the config's content and snippets, and
refusals that leave an existing config untouched."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from cascader.ethosu.vela_arch import DEFAULT_VELA_INI
from cascader.ethosu.vela_baseline import run_vela
from dse.cli import main
from dse.config import feasible_trials, load_config, pool_within
from dse.config_schema import CONFIG_SCHEMA, schema_errors
from dse.errors import BadInput, NothingFits

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"


@pytest.fixture(scope="module")
def study_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("export")
    argv = ["sweep", "--model", str(EXAMPLE), "--trials", "8", "--study", "s", "--out", str(out)]
    argv += ["--producers", "cascader"]  # the cascader's pools and builds (vela: test_producers)
    argv += ["--sram-min", "96KiB", "--sram-max", "1MiB", "--seed", "3", "--json"]
    assert main(argv) == 0
    return f"sqlite:///{out / 'study.db'}"


def _export(storage: str, out: Path, *pick: str) -> int:
    return main(["export", "--storage", storage, "--study", "s", *pick, "-o", str(out)])


def _points(storage: str) -> list[tuple[int, int, int, int]]:
    study = optuna.load_study(study_name="s", storage=storage)
    return [
        (
            t.user_attrs["metrics"]["sram_used_bytes"],
            round(t.user_attrs["metrics"]["total_cycles"]),
            t.user_attrs["config"]["sram_pool_bytes"],
            t.number,
        )
        for t in feasible_trials(study)
    ]


def test_export_by_trial_writes_a_valid_config_for_the_model(study_db: str, tmp_path: Path):
    sram, cycles, _, number = _points(study_db)[0]
    cfg = tmp_path / "cfg.json"
    assert _export(study_db, cfg, "--trial", str(number)) == 0
    config = load_config(cfg, EXAMPLE)
    assert schema_errors(config, CONFIG_SCHEMA) == []
    assert config["predicted"]["sram_used_bytes"] == sram
    assert config["predicted"]["total_cycles"] == round(cycles)
    assert config["study"] == {"name": "s", "trial": number, "storage": study_db}
    pool = config["sram_pool_bytes"]
    assert sram <= pool and pool % 16 == 0
    flags = config["snippets"]["vela_flags"]
    assert flags[flags.index("--arena-cache-size") + 1] == str(pool)
    tvm = config["snippets"]["tvm"]
    assert tvm["workspace_memory_pools"][0]["size_hint_bytes"] == pool
    options = tvm["target"]["options"]
    assert {k: options[k] for k in config["cascader"]["options"]} == {
        k: int(v) if isinstance(v, bool) else v for k, v in config["cascader"]["options"].items()
    }


def test_vela_ini_snippet_is_accepted_by_vela(study_db: str, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    assert _export(study_db, cfg, "--trial", str(_points(study_db)[0][3])) == 0
    config = json.loads(cfg.read_text())
    ini = tmp_path / "vela.ini"
    ini.write_text(DEFAULT_VELA_INI.read_text() + "\n" + config["snippets"]["vela_ini"])
    mode = f"{config['memory_mode']}_dse"
    result = run_vela(
        EXAMPLE, config["accelerator"], config["system_config"], mode, config_path=ini
    )
    assert result.cycles_total > 0 and result.sram_used_bytes > 0


def test_max_sram_picks_the_fastest_within_and_max_cycles_the_smallest(
    study_db: str, tmp_path: Path
) -> None:
    points = _points(study_db)
    budget = sorted(p[0] for p in points)[len(points) // 2]
    cfg = tmp_path / "cfg.json"
    assert _export(study_db, cfg, "--max-sram", str(budget)) == 0
    chosen = json.loads(cfg.read_text())["study"]["trial"]
    ranked = [
        n for _, _, _, n in sorted((c, s, pool, n) for s, c, pool, n in points if s <= budget)
    ]
    # The fastest within, or the next when a faster one does not build the same at a pool
    # within the budget (its sampled pool lies above it and lowered chooses another proposal).
    study = optuna.load_study(study_name="s", storage=study_db)
    for passed in ranked[: ranked.index(chosen)]:
        with pytest.raises(NothingFits):
            pool_within(study, study.trials[passed], budget)
    limit = sorted(p[1] for p in points)[len(points) // 2]
    assert _export(study_db, cfg, "--max-cycles", str(limit)) == 0
    best = min((s, c, pool, n) for s, c, pool, n in points if c <= limit)
    assert json.loads(cfg.read_text())["study"]["trial"] == best[3]


def test_max_sram_writes_a_pool_within_the_budget_that_builds_the_same(
    study_db: str, tmp_path: Path
) -> None:
    """A budget between what the fastest point within it uses and the pool it was sampled
    with: the config's pool (Vela's arena and TVM's pool hint too) is within the budget, and
    the point compiles there exactly as at the pool it was scored with."""
    over = [p for p in _points(study_db) if p[2] - p[0] >= 64]  # pools well above their use
    sram, cycles, pool, number = min(over, key=lambda p: (p[1], p[0]))
    faster_within = [
        p for p in _points(study_db) if (p[1], p[0]) < (cycles, sram) and p[0] <= pool - 32
    ]
    budget = min([pool - 32, *(p[0] - 16 for p in faster_within)])
    budget = max(budget, sram)
    cfg = tmp_path / "cfg.json"
    assert _export(study_db, cfg, "--max-sram", str(budget)) == 0
    config = json.loads(cfg.read_text())
    assert config["study"]["trial"] == number
    assert sram <= config["sram_pool_bytes"] <= budget
    flags = config["snippets"]["vela_flags"]
    assert int(flags[flags.index("--arena-cache-size") + 1]) <= budget
    assert config["snippets"]["tvm"]["workspace_memory_pools"][0]["size_hint_bytes"] <= budget
    assert "not this point's schedule" in config["snippets"]["vela_note"]
    builds = []
    for where, args in (("written", ["--config", str(cfg)]), ("sampled", ["--trial", str(number)])):
        if where == "sampled":
            assert _export(study_db, cfg, *args) == 0
            args = ["--config", str(cfg)]
        out = tmp_path / where
        assert main(["compile", "--model", str(EXAMPLE), *args, "-o", str(out)]) == 0
        builds.append({f.name: f.read_bytes() for f in out.iterdir() if f.name != "manifest.json"})
    assert builds[0] == builds[1]


@pytest.mark.parametrize(
    ("pick", "code", "message"),
    [
        (["--max-sram", "1KiB"], 3, "no trial fits in 1.0 KiB"),
        (["--max-cycles", "1"], 3, "no trial meets 1 cycles"),
        (["--trial", "999"], 2, "has no trial 999"),
    ],
)
def test_failed_export_keeps_the_existing_config(
    study_db: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    pick: list[str],
    code: int,
    message: str,
) -> None:
    cfg = tmp_path / "cfg.json"
    assert _export(study_db, cfg, "--trial", str(_points(study_db)[0][3])) == 0
    before = cfg.read_bytes()
    capsys.readouterr()
    assert _export(study_db, cfg, *pick) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert cfg.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["cfg.json"], "no temporary file left behind"


def test_config_for_another_model_is_refused(study_db: str, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    assert _export(study_db, cfg, "--trial", str(_points(study_db)[0][3])) == 0
    other = tmp_path / "other.tflite"
    other.write_bytes(EXAMPLE.read_bytes() + b"\0")
    with pytest.raises(BadInput, match=r"was made for .*mobilenet_like_96\.tflite") as err:
        load_config(cfg, other)
    assert err.value.exit_code == 2 and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"format": "cascader-dse-config", "version": 1,', "is not valid JSON (line 1"),
        ("[1, 2]", "not a valid dse config: $: must be object"),
        (
            '{"format": "cascader-dse-config", "version": 2}',
            "has version 2; this dse reads version 1",
        ),
    ],
    ids=["truncated", "not-an-object", "wrong-version"],
)
def test_corrupt_config_is_one_line_bad_input(text: str, message: str, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(text)
    with pytest.raises(BadInput) as err:
        load_config(cfg)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_schema_violation_names_the_field(study_db: str, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    assert _export(study_db, cfg, "--trial", str(_points(study_db)[0][3])) == 0
    config = json.loads(cfg.read_text())
    config["sram_pool_bytes"] = "256KiB"
    config["cascader"]["options"]["stripe_factors"] = True
    cfg.write_text(json.dumps(config))
    with pytest.raises(BadInput, match=r"\$\.sram_pool_bytes: must be integer.*\(and 1 more\)"):
        load_config(cfg, EXAMPLE)


def test_the_tvm_snippet_runs_this_projects_tvm_flow(study_db: str, tmp_path: Path) -> None:
    """The snippet's target and pool, as its `usage` line sets them, lower the model with
    `relax_to_tir` (TVM 0.27 has no Relay: the snippet names nothing of it)."""
    from cascader.frontend.legalize import ethosu_functions
    from cascader.frontend.partition import partition_for_ethosu
    from cascader.frontend.tflite_import import import_tflite
    from cascader.lowering.relax_to_tir import EthosuTarget, relax_to_tir

    cfg = tmp_path / "cfg.json"
    assert _export(study_db, cfg, "--trial", str(_points(study_db)[0][3])) == 0
    tvm = json.loads(cfg.read_text())["snippets"]["tvm"]
    assert "relay" not in json.dumps(tvm)
    partitioned = partition_for_ethosu(import_tflite(EXAMPLE.read_bytes()))
    mod = partitioned.with_attr("workspace_memory_pools", tvm["workspace_memory_pools"])
    lowered = relax_to_tir(mod, EthosuTarget.from_snippet(tvm))
    pool = tvm["workspace_memory_pools"][0]["size_hint_bytes"]
    for name, _ in ethosu_functions(partitioned):
        prim = lowered[name]
        assert len(prim.attrs["ethos-u.command_stream"].numpy()) > 0
        assert 0 < int(prim.attrs["ethos-u.scratch_size"]) <= pool

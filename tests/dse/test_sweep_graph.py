"""`dse sweep --graph`: studies on cascader graphs, continuation, front, and bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from cascader.testing.shared import shared_dir
from dse.cli import main
from dse.driver import make_sampler
from dse.study import SETTINGS_ATTR

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

SHARED = shared_dir()
GOLDEN = SHARED / "golden" if SHARED else None
needs_golden = pytest.mark.skipif(
    GOLDEN is None or not GOLDEN.is_dir(), reason="shared/golden not present"
)


@pytest.fixture
def kws_graph(tmp_path: Path) -> Path:
    assert GOLDEN is not None
    path = tmp_path / "kws.json"
    shutil.copy(GOLDEN / "kws_dscnn_s1_p64k.json", path)
    return path


def _sweep(graph: Path, out: Path, *extra: str) -> int:
    return main(
        [
            "sweep",
            "--graph",
            str(graph),
            "--out",
            str(out),
            "--sram-min",
            "8KiB",
            "--sram-max",
            "256KiB",
            *extra,
        ]
    )


def _refusal(capsys: pytest.CaptureFixture[str], code: int) -> str:
    """The one error line of a command refused as bad input."""
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _study(out: Path) -> optuna.Study:
    storage = f"sqlite:///{out / 'study.db'}"
    (summary,) = optuna.get_all_study_summaries(storage)
    return optuna.load_study(study_name=summary.study_name, storage=storage)


@needs_golden
def test_sweep_records_trials_and_continues(
    kws_graph: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _sweep(kws_graph, out, "--trials", "6", "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert result["trials"] == 6
    assert result["front"], "a 256 KiB ceiling fits kws_dscnn"
    for row in result["front"]:
        assert row["fits"] and row["sram_used_bytes"] <= row["config"]["sram_pool_bytes"]
        assert row["config"]["sram_pool_bytes"] % 16 == 0
    assert _sweep(kws_graph, out, "--trials", "4", "--json") == 0
    assert json.loads(capsys.readouterr().out)["trials"] == 10
    study = _study(out)
    trial = study.trials[0]
    assert set(trial.user_attrs) >= {"config", "metrics", "model_sha256", "versions"}
    assert trial.user_attrs["versions"]["optuna"].startswith("5.")


@needs_golden
def test_front_is_mutually_non_dominated(
    kws_graph: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _sweep(kws_graph, tmp_path / "o", "--trials", "12", "--json") == 0
    front = json.loads(capsys.readouterr().out)["front"]
    points = [(r["sram_used_bytes"], r["total_cycles"]) for r in front]
    assert len(set(points)) == len(points)
    for a in points:
        for b in points:
            assert not (b != a and b[0] <= a[0] and b[1] <= a[1]), (a, b)


@needs_golden
def test_grid_sampler_stops_when_the_grid_is_done(kws_graph: Path, tmp_path: Path) -> None:
    out = tmp_path / "grid"
    assert _sweep(kws_graph, out, "--sampler", "grid", "--trials", "500", "--json") == 0
    study = _study(out)
    # 8 KiB..256 KiB is 5 octaves at 2 steps each: 11 pool sizes x 2 x 2 switches.
    assert len(study.trials) == 11 * 4


@needs_golden
def test_a_study_continued_with_another_graph_or_objectives_is_refused_and_kept(
    kws_graph: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _sweep(kws_graph, out, "--trials", "3", "--study", "s", "--json") == 0
    other = tmp_path / "other.json"
    shutil.copy(GOLDEN / "ic_resnet8_s1_p32k.json", other)
    capsys.readouterr()
    assert "was made for" in _refusal(capsys, _sweep(other, out, "--trials", "3", "--study", "s"))
    # The refusal names the study's own value and the flag to drop.
    code = _sweep(kws_graph, out, "--trials", "3", "--study", "s", "--objectives",
                  "cycles,sram,offchip")  # fmt: skip
    refusal = _refusal(capsys, code)
    assert "made with --objectives cycles,sram, not cycles,sram,offchip" in refusal
    assert "drop --objectives to continue it" in refusal
    assert len(_study(out).trials) == 3


@needs_golden
def test_a_continued_study_keeps_its_pool_range(
    kws_graph: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without range flags, a continued study samples its own range, not the defaults; a
    different range given is refused in one line, and the study is left as it was."""
    out = tmp_path / "out"
    assert _sweep(kws_graph, out, "--trials", "4", "--json") == 0
    argv = ["sweep", "--graph", str(kws_graph), "--out", str(out), "--trials", "4", "--json"]
    assert main(argv) == 0
    pools = [t.user_attrs["config"]["sram_pool_bytes"] for t in _study(out).trials]
    assert len(pools) == 8 and all(8 * 1024 <= p <= 256 * 1024 for p in pools)
    capsys.readouterr()
    refusal = _refusal(capsys, main([*argv, "--sram-max", "1MiB"]))
    assert "made with --sram-max 256.0 KiB, not 1.00 MiB; drop --sram-max" in refusal
    assert len(_study(out).trials) == 8


def test_sram_min_above_max_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = tmp_path / "g.json"
    graph.write_text("{}")
    code = main(
        [
            "sweep",
            "--graph",
            str(graph),
            "--sram-min",
            "1MiB",
            "--sram-max",
            "64KiB",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--sram-min" in err[0] and "larger than --sram-max" in err[0]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--graph", "missing.json"], "not found"),
        ([], "exactly one of --model"),
    ],
)
def test_bad_sources_are_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", *argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_corrupt_graph_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = tmp_path / "g.json"
    graph.write_text('{"format": "cascader-graph", "version": 1, "tensors": [')
    assert main(["sweep", "--graph", str(graph), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not valid JSON" in err[0]


@needs_golden
def test_unreachable_storage_is_one_line(
    kws_graph: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _sweep(
        kws_graph,
        tmp_path / "o",
        "--storage",
        "postgresql+psycopg2://nobody@127.0.0.1:1/none",
        "--trials",
        "1",
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot open storage" in err[0]


def _trials(out: Path) -> list[tuple[dict, list[float] | None]]:
    return [(t.params, t.values) for t in _study(out).trials]


@needs_golden
def test_a_seeded_sweep_repeats_itself(kws_graph: Path, tmp_path: Path) -> None:
    runs = {}
    for name, seed in (("a", "7"), ("b", "7"), ("c", "8")):
        assert _sweep(kws_graph, tmp_path / name, "--trials", "20", "--seed", seed, "--json") == 0
        runs[name] = _trials(tmp_path / name)
    assert len(runs["a"]) == 20
    assert runs["a"] == runs["b"]
    assert runs["a"] != runs["c"]


def test_the_seeded_default_sampler_is_optunas_default() -> None:
    default = optuna.create_study(directions=["minimize", "minimize"]).sampler
    assert make_sampler("default") is None
    assert type(make_sampler("default", 1)) is type(default)


@needs_golden
def test_a_continued_study_keeps_its_sampler_unless_another_is_named(
    kws_graph: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"

    def run(*extra: str) -> tuple[str, list[bool]]:
        """The stored sampler, and per trial of this run whether NSGA-II sampled it."""
        start = len(_study(out).trials) if (out / "study.db").exists() else 0
        assert _sweep(kws_graph, out, "--trials", "4", "--seed", "3", "--json", *extra) == 0
        study = _study(out)
        nsga = [any(k.startswith("NSGAII") for k in t.system_attrs) for t in study.trials]
        return study.user_attrs[SETTINGS_ATTR]["sampler"], nsga[start:]

    sampler, first = run("--sampler", "nsga2")
    assert sampler == "nsga2" and any(first)
    sampler, kept = run()
    assert sampler == "nsga2" and any(kept)
    sampler, switched = run("--sampler", "tpe")
    assert sampler == "tpe" and not any(switched)


@needs_golden
def test_the_dse_command_leaves_the_study_file_whole(kws_graph: Path, tmp_path: Path) -> None:
    """`python -m dse` skips the collector at exit (dse.cli.script), so it closes its storage
    itself: no write-ahead log is left beside the study, and the file alone holds the trials."""
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "dse", "sweep", "--graph", str(kws_graph), "--out", str(out)]
    argv += ["--sram-min", "8KiB", "--sram-max", "256KiB", "--trials", "3", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["study.db"]
    copy = tmp_path / "copy.db"
    shutil.copy(out / "study.db", copy)
    (summary,) = optuna.get_all_study_summaries(f"sqlite:///{copy}")
    assert summary.n_trials == 3

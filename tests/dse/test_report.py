"""`dse sweep --baseline vela` and `dse report`: Vela's points stored in the study and matched
by the front, the plots and the self-contained page (rendered in a real browser), the memory
timeline against the point's SRAM, cache counts, and the study in optuna-dashboard."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import re
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import optuna
import pytest
from pages import check_page_renders

from cascader.testing.shared import shared_dir
from dse.cascade_map import Cascade, CascadeLayer, cascade_rows
from dse.cli import main
from dse.evaluators import model_session
from dse.front import front_progress, pareto_front
from dse.plots.figure import size_label, size_ticks
from dse.point_view import point_view
from dse.study import load_settings
from dse.timeline import KINDS
from dse.vela_points import VELA_ATTR, count_matched

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FIGURES = ("front", "layers", "memory", "convergence")


def _sweep(out: Path, model: Path, trials: int, *flags: str) -> tuple[str, dict]:
    """A `--baseline vela` study "s" of `model` in `out`: its storage URL and the JSON."""
    argv = ["sweep", "--model", str(model), "--trials", str(trials), "--study", "s"]
    argv += ["--producers", "cascader"]  # the cascader's schedules: memory timelines, cascades
    argv += ["--out", str(out), "--baseline", "vela", "--json", *flags]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return f"sqlite:///{out / 'study.db'}", json.loads(buf.getvalue())


def _report(storage: str, out: Path, *flags: str) -> Path:
    with contextlib.redirect_stdout(io.StringIO()):
        assert (
            main(["report", "--storage", storage, "--study", "s", "--out", str(out), *flags]) == 0
        )
    return out


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    out = tmp_path_factory.mktemp("report")
    return _sweep(out, EXAMPLE, 6, "--sram-min", "96KiB", "--sram-max", "512KiB")


@pytest.fixture(scope="module")
def reported(swept: tuple[str, dict], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of trial 0 (a seed: it always completes) with an SRAM and a latency budget."""
    flags = ("--trial", "0", "--budget-sram", "128KiB", "--budget-cycles", "400000")
    return _report(swept[0], tmp_path_factory.mktemp("report") / "out", *flags)


def _check_peaks(storage: str, trials: list[optuna.trial.FrozenTrial]) -> None:
    """The memory timeline of each trial peaks at the SRAM its trial recorded."""
    settings = load_settings(optuna.load_study(study_name="s", storage=storage))
    session = model_session(settings)
    for trial in trials:
        view = point_view(settings, trial, session)
        timeline = view.timeline
        assert timeline.peak == trial.user_attrs["metrics"]["sram_used_bytes"]
        assert timeline.peak <= timeline.pool
        # The address peak and the most bytes live are told apart (issue 42).
        live = [sum(timeline.bytes_by_kind[k][s] for k in KINDS) for s in range(timeline.steps)]
        assert timeline.live_peak == max(live) <= timeline.peak
        assert timeline.fragmentation == timeline.peak - max(live) >= 0


def _check_report_files(out: Path) -> str:
    """Every figure as PNG and SVG, each embedded once in a page that fetches nothing; the
    page's text."""
    for name in FIGURES:
        assert (out / f"{name}.png").read_bytes().startswith(PNG_MAGIC), name
        assert "<svg" in (out / f"{name}.svg").read_text(), name
    page = (out / "report.html").read_text()
    pngs = sorted(p.stem for p in out.glob("*.png"))
    assert page.count("src='data:image/png;base64,") == len(pngs)
    assert all(f"id='{name}'" in page for name in pngs)
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page), "the page must not fetch"
    assert "the rebuilt schedule" not in (out / "summary.md").read_text()
    return page


def test_baseline_stores_vela_at_front_budgets_and_the_ladder(swept: tuple[str, dict]) -> None:
    storage, result = swept
    study = optuna.load_study(study_name="s", storage=storage)
    rows = study.user_attrs[VELA_ATTR]
    budgets = {r["arena_cache_size"] for r in rows}
    assert {128 * 1024, 256 * 1024, 512 * 1024} <= budgets  # the ladder within 96..512 KiB
    for point in result["front"]:
        assert -(-point["sram_used_bytes"] // 16) * 16 in budgets
    assert all(r["core"] == "regor" and r["cycles_total"] > 0 for r in rows)
    assert [r["optimise"] for r in rows].count("Size") == 1
    # Performance points by arena cache size, then the Size point (its own arena size).
    order = sorted(rows, key=lambda r: (r["optimise"] == "Size", r["arena_cache_size"] or 0))
    assert result["vela"] == order
    assert result["vela_matched"] == count_matched(result["front"], rows)


def test_sweep_prints_the_vela_points_the_front_matches_and_progress_names_the_front(
    swept: tuple[str, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage, result = swept
    with (
        sqlite3.connect(storage.removeprefix("sqlite:///")) as source,
        sqlite3.connect(tmp_path / "study.db") as copy,
    ):
        source.backup(copy)  # the study as a reader sees it (SQLite may hold part in its WAL)
    argv = ["sweep", "--model", str(EXAMPLE), "--trials", "1", "--study", "s"]
    argv += ["--producers", "cascader"]
    assert main([*argv, "--out", str(tmp_path)]) == 0  # continues the copy, prints text
    printed = capsys.readouterr().out
    found = re.search(r"the front matches (\d+) of Vela.s (\d+) points", printed)
    assert found is not None and int(found[2]) == len(result["vela"]), printed
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}")
    front = pareto_front(study)
    rows = [t.user_attrs["metrics"] for t in front]
    assert int(found[1]) == count_matched(rows, result["vela"])
    fastest = min(rows, key=lambda m: m["total_cycles"])
    progress = front_progress(front)
    assert progress.startswith(
        f"front {len(front)}, fastest {round(fastest['total_cycles']):,} cycles"
    )


def test_cache_counts_are_stored_and_reported(swept: tuple[str, dict]) -> None:
    _, result = swept
    cache = result["cache"]
    # Six trials and the one seed's floor probe (see dse.driver.floor_seeds).
    assert sum(cache["results"].values()) == 7
    # Every point scored afresh with the cascader on looked its proposals up once; the
    # seed's probe generated them (a miss) and later points of its options found them.
    scored = cache["results"]["misses"]
    assert 1 <= cache["proposals"]["misses"] <= sum(cache["proposals"].values()) <= scored
    assert sum(cache["scores"].values()) <= scored


def test_report_writes_self_contained_page_plots_and_summary(
    swept: tuple[str, dict], reported: Path
) -> None:
    _, result = swept
    assert "The chosen point: trial 0" in _check_report_files(reported)
    summary = (reported / "summary.md").read_text()
    for heading in ("Pareto front", "Vela 5.2 at the same budgets", "The chosen point: trial 0"):
        assert f"## {heading}" in summary
    assert "scored points " in summary and "proposals " in summary
    assert re.search(r"matched (Vela's \d+ points at trial \d+|\d+ of Vela's \d+ points)", summary)
    assert "| cascade | layer | operator |" in summary and "SRAM peaks at" in summary
    assert "is ever live" in summary and "to gaps between buffers" in summary
    assert re.search(r"SRAM lower bound\*\*: [\d.]+ KiB: no schedule needs less; while ", summary)
    for point in result["front"]:
        assert f"{point['trial']:>5}" in summary


def test_memory_timeline_peaks_at_the_sram_each_front_point_uses(swept: tuple[str, dict]) -> None:
    storage, _ = swept
    study = optuna.load_study(study_name="s", storage=storage)
    _check_peaks(storage, pareto_front(study))


def test_report_of_a_shared_model_names_its_layers_as_the_model_does(tmp_path: Path) -> None:
    model = (shared_dir() or Path("/absent")) / "models" / "kws_dscnn.tflite"
    if not model.is_file():
        pytest.skip(f"shared model {model} not present")
    storage, result = _sweep(tmp_path, model, 4)
    page = _check_report_files(_report(storage, tmp_path / "report"))
    assert "StatefulPartitionedCall_1:0" in page and "SOFTMAX #11" in page  # the output layer
    assert "CONV_2D #0" in page
    study = optuna.load_study(study_name="s", storage=storage)
    _check_peaks(storage, pareto_front(study))
    assert result["vela"] and result["vela_matched"] == count_matched(
        result["front"], result["vela"]
    )


def test_cascade_map_rows_join_the_plans_of_one_decomposed_layer() -> None:
    def layer(name: str, stripes: int, buffer_bytes: int) -> CascadeLayer:
        return CascadeLayer(
            name, f"{name.upper()} #0", 1, stripes, "whole tensor (sram)", buffer_bytes
        )

    cascades = [
        Cascade(0, (layer("conv", 4, 2048), layer("pool", 2, 64))),
        Cascade(1, (layer("softmax", 1, 64),)),
        Cascade(2, (layer("softmax", 1, 16),)),
        Cascade(3, (layer("fc", 1, 16),)),
    ]
    assert [row[:5] + row[6:] for row in cascade_rows(cascades)] == [
        ("1 (2 layers)", "conv", "CONV #0", "1", "4", "2.0 KiB"),
        ("", "pool", "POOL #0", "1", "2", "64 B"),
        ("2-3", "softmax", "SOFTMAX #0", "2", "2", "16 B"),
        ("4", "fc", "FC #0", "1", "1", "16 B"),
    ]


@pytest.mark.parametrize("low, high", [(13.5, 25.6), (90, 210), (14, 4500), (40, 100)])
def test_sram_ticks_span_the_whole_range_in_kib(low: float, high: float) -> None:
    ticks = size_ticks(low * 1024, high * 1024)
    assert 5 <= len(ticks) <= 10 and ticks == sorted(ticks)
    assert all(low * 1024 <= t <= high * 1024 for t in ticks)
    # No stretch of the log axis without a tick: neighbours at most a factor 2.2 apart, the
    # ends within that of the range's.
    edges = [low * 1024, *ticks, high * 1024]
    assert max(b / a for a, b in itertools.pairwise(edges)) <= 2.2
    assert all(size_label(t).endswith(("KiB", "MiB")) for t in ticks)


def test_report_on_a_graph_study_with_few_trials_skips_what_it_cannot_draw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = tmp_path / "g.json"
    assert main(["graph", "--model", str(EXAMPLE), "-o", str(graph)]) == 0
    argv = ["sweep", "--graph", str(graph), "--trials", "2", "--study", "g"]
    assert main([*argv, "--out", str(tmp_path), "--json"]) == 0
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    out = tmp_path / "report"
    assert main(["report", "--storage", storage, "--study", "g", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "convergence.png",
        "convergence.svg",
        "front.png",
        "front.svg",
        "report.html",
        "summary.md",
    ]
    assert "a graph study has no schedule to draw" in (out / "summary.md").read_text()


def test_report_refuses_a_trial_the_study_lacks(
    swept: tuple[str, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage, _ = swept
    argv = ["report", "--storage", storage, "--study", "s", "--out", str(tmp_path)]
    assert main([*argv, "--trial", "99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no completed trial 99" in err[0]


def test_the_page_renders_in_headless_chromium(reported: Path, tmp_path: Path) -> None:
    check_page_renders(reported, tmp_path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def test_optuna_dashboard_lists_the_study_with_its_metric_names(swept: tuple[str, dict]) -> None:
    storage, _ = swept
    exe = Path(sys.executable).with_name("optuna-dashboard")
    port = _free_port()
    argv = [str(exe), storage, "--host", "127.0.0.1", "--port", str(port), "--quiet"]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}/api/studies"
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stderr.read().decode()
            try:
                studies = _get(base)["study_summaries"]
                break
            except OSError:
                assert time.monotonic() < deadline, "optuna-dashboard did not answer"
                time.sleep(0.3)
        (study,) = [s for s in studies if s["study_name"] == "s"]
        assert study["directions"] == ["minimize", "minimize"]
        detail = _get(f"{base}/{study['study_id']}")
        assert detail["objective_names"] == ["cycles", "sram_bytes"]
        assert len(detail["trials"]) >= 6
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_the_front_plot_draws_the_lower_bound_where_the_arena_is_in_sram() -> None:
    from dse.plots.front import FrontData

    in_sram = {"sram_used_bytes": 4096, "total_cycles": 1.0, "sram_lower_bound_bytes": 1024}
    in_dram = {**in_sram, "sram_lower_bound_bytes": 0}
    assert FrontData("s", [in_sram], [], [in_sram], []).lower_bound == 1024
    assert FrontData("s", [in_dram], [], [in_dram], []).lower_bound is None  # no 0 on a log axis
    assert FrontData("s", [{"sram_used_bytes": 1}], [], [], []).lower_bound is None  # stored before

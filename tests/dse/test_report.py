"""`dse sweep --baseline vela` and `dse report`: Vela's points stored in the study, plots and
a self-contained page, cache counts."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import optuna
import pytest

from dse.cli import main
from dse.vela_points import VELA_ATTR

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    out = tmp_path_factory.mktemp("report")
    capture = out / "sweep.json"
    argv = ["sweep", "--model", str(EXAMPLE), "--trials", "6", "--study", "s", "--out", str(out)]
    argv += ["--sram-min", "96KiB", "--sram-max", "512KiB", "--baseline", "vela", "--json"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    capture.write_text(buf.getvalue())
    return f"sqlite:///{out / 'study.db'}", json.loads(buf.getvalue())


def test_baseline_stores_vela_at_front_budgets_and_the_ladder(swept: tuple[str, dict]) -> None:
    storage, result = swept
    study = optuna.load_study(study_name="s", storage=storage)
    rows = study.user_attrs[VELA_ATTR]
    budgets = {r["arena_cache_size"] for r in rows}
    assert {128 * 1024, 256 * 1024, 512 * 1024} <= budgets  # the ladder within 96..512 KiB
    for point in result["front"]:
        assert -(-point["sram_used_bytes"] // 16) * 16 in budgets
    assert all(r["core"] == "regor" and r["cycles_total"] > 0 for r in rows)
    assert result["vela"] == sorted(rows, key=lambda r: r["arena_cache_size"])


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
    swept: tuple[str, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage, result = swept
    out = tmp_path / "report"
    assert main(["report", "--storage", storage, "--study", "s", "--out", str(out)]) == 0
    assert "report.html" in capsys.readouterr().out
    for name in ("front", "layers", "importances"):
        assert (out / f"{name}.png").read_bytes().startswith(PNG_MAGIC)
        assert "<svg" in (out / f"{name}.svg").read_text()
    page = (out / "report.html").read_text()
    assert page.count("src='data:image/png;base64,") == 3
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page), "the page must not fetch"
    summary = (out / "summary.md").read_text()
    assert "## Pareto front" in summary and "## Vela 5.2 at the same budgets" in summary
    assert "scored points " in summary and "proposals " in summary
    for point in result["front"]:
        assert f"{point['trial']:>5}" in summary


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
        "front.png",
        "front.svg",
        "report.html",
        "summary.md",
    ]


def test_report_draws_the_layers_of_the_trial_asked_for(
    swept: tuple[str, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage, _ = swept
    argv = ["report", "--storage", storage, "--study", "s", "--out", str(tmp_path)]
    assert main([*argv, "--trial", "0"]) == 0
    assert "trial 0" in (tmp_path / "report.html").read_text()
    capsys.readouterr()
    assert main([*argv, "--trial", "99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no completed trial 99" in err[0]

"""What the report got wrong for a first-time reader: the chosen point is the front's knee (not
the fastest at twice the SRAM), a 0 B point (U65, arena in DRAM) is drawn without a warning,
one point gets round axis ticks, the convergence title names Vela's points only when there
are some, the plans strip names only the colours it draws; a U65 study's page renders."""

from __future__ import annotations

import contextlib
import io
import warnings
from datetime import datetime
from pathlib import Path

import optuna
import pytest
from pages import check_page_renders

from dse.cli import main
from dse.convergence import History
from dse.front import pareto_front
from dse.plots.convergence import convergence_title
from dse.plots.figure import ZERO_DRAWN, drawn_bytes, log_range, size_ticks
from dse.plots.memory import strip_label
from dse.report import KNEE_SLACK, knee, selected_trial
from dse.timeline import CascadeSpan, Timeline

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"


def _trial(number: int, sram: int, cycles: float) -> optuna.trial.FrozenTrial:
    now = datetime.now()
    metrics = {"sram_used_bytes": sram, "total_cycles": cycles}
    return optuna.trial.FrozenTrial(
        number=number, state=optuna.trial.TrialState.COMPLETE, value=None, values=[cycles, sram],
        datetime_start=now, datetime_complete=now, params={}, distributions={},
        user_attrs={"metrics": metrics}, system_attrs={}, intermediate_values={},
        trial_id=number,
    )  # fmt: skip


def test_the_knee_is_the_least_sram_within_the_slack_of_the_fastest() -> None:
    front = [_trial(0, 100_000, 999_000), _trial(1, 200_000, 995_000),
             _trial(2, 400_000, 990_000), _trial(3, 50_000, 1_500_000)]  # fmt: skip
    assert KNEE_SLACK == 0.01
    assert knee(front).number == 0  # 0.9% slower than the fastest at a quarter of its SRAM
    assert knee([front[2], front[3]]).number == 2
    assert knee([]) is None


@pytest.fixture(scope="module")
def u65(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A U65 (Dedicated_Sram) study whose seeds include the cascader off with every weight read
    in place: 0 B of SRAM."""
    out = tmp_path_factory.mktemp("u65")
    argv = ["sweep", "--model", str(EXAMPLE), "--accelerator-config", "ethos-u65-256",
            "--trials", "16", "--study", "s", "--out", str(out), "--json"]  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    return out


def test_a_u65_report_draws_its_0_b_point_without_a_warning_and_shows_the_knee(
    u65: Path, tmp_path: Path
) -> None:
    storage = f"sqlite:///{u65 / 'study.db'}"
    study = optuna.load_study(study_name="s", storage=storage)
    front = pareto_front(study)
    assert min(t.user_attrs["metrics"]["sram_used_bytes"] for t in front) == 0
    assert selected_trial(study, None).number == knee(front).number
    out = tmp_path / "report"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns when a log axis gets a 0
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["report", "--storage", storage, "--study", "s", "--out", str(out)]) == 0
    summary = (out / "summary.md").read_text()
    assert "the knee: least SRAM within 1% of the fastest front point" in summary
    check_page_renders(out, tmp_path)


def test_a_0_b_point_and_a_single_point_get_a_readable_log_axis() -> None:
    assert drawn_bytes(0) == ZERO_DRAWN and drawn_bytes(4096) == 4096
    low, high = log_range(1_113_000, 1_113_000)
    assert high / low >= 4
    ticks = size_ticks(low, high)
    assert any(t == 1 << 20 for t in ticks)  # a round tick (1 MiB) rather than 1.062 MiB


def test_convergence_names_vela_only_with_vela_points() -> None:
    assert "Vela" not in convergence_title(History((), (), 0))
    assert "Vela points" in convergence_title(History((), (), 3))


def test_the_plans_strip_names_only_the_colours_it_draws() -> None:
    def timeline(layers: int) -> Timeline:
        return Timeline(1024, {}, [0, 0], (CascadeSpan(0, 0, 1, layers),), ("a", "b"), 0, ())

    assert "purple" not in strip_label(timeline(1))
    assert "purple" in strip_label(timeline(3))

"""The seeded fuzz suite (issue 21): hostile model bytes, special files, configs, flag values
and damaged study databases given to `dse`, each case bounded at 60 s. Every case must end
with exit 0, 2 or 3, and a refusal must be one line, with no traceback. Then every class of
failure the issue found, as a named case of its own. `benchmarks/fuzz.py` runs more seeds."""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from fuzz_cases import CATEGORIES, FILE_FLAGS, SPECIAL, Study, cases, make_study
from fuzz_models import base_model, with_fields, with_vector_length
from fuzz_run import execute, run_case

pytestmark = pytest.mark.slow  # the full suite only: `pytest -m "not slow"` leaves it out

SEED = 21
# Cases per category in CI: about 400, under a minute on two cores. Every special file under
# every file flag is one of them (17 x 9).
CI_COUNTS = {
    "model-estimate": 120,
    "model-sweep": 20,
    "special-file": len(SPECIAL) * len(FILE_FLAGS),
    "config": 60,
    "flags": 60,
    "study-db": 40,
    "compiled-stream": 40,
    "graph-json": 40,
    "output-path": 25,
}


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Study:
    return make_study(tmp_path_factory.mktemp("fuzz-study"), lambda argv: run_case(argv).code)


@pytest.mark.parametrize("category", sorted(CI_COUNTS))
def test_seeded_cases_keep_the_promise(category: str, study: Study, tmp_path: Path) -> None:
    failed = []
    for case in cases({category: CI_COUNTS[category]}, SEED, study):
        problems = execute(case, tmp_path).problems(case.allowed)
        if problems:
            failed.append(f"seed {case.seed} ({case.what}): {'; '.join(problems)}")
    assert not failed, "\n".join(failed)


# ------------------------------------------------------------------ named regression cases
# Each builds its command line in a fresh folder from the shared study, and names the exit
# code it must end with and a piece of the one line it must print.
Make = Callable[[Path, Study], list[str]]


def _estimate(data: bytes, *flags: str) -> Make:
    def make(folder: Path, study: Study) -> list[str]:
        (folder / "m.tflite").write_bytes(data)
        return ["estimate", "--model", str(folder / "m.tflite"), "--json", *flags]

    return make


def _field(base: str, values: dict[str, int | float], *flags: str) -> Make:
    return _estimate(with_fields(base_model(base), values), *flags)


def _on_study_model(*flags: str) -> Make:
    return lambda folder, study: ["estimate", "--model", str(study.model), "--json", *flags]


def _config(edit: Callable[[dict], object], command: str = "compile") -> Make:
    """The study's exported config, edited by `edit` (which may return the text to write)."""

    def make(folder: Path, study: Study) -> list[str]:
        config = json.loads(study.config.read_text())
        text = edit(config)
        (folder / "cfg.json").write_text(text if isinstance(text, str) else json.dumps(config))
        argv = [command, "--model", str(study.model), "--config", str(folder / "cfg.json")]
        return [*argv, "-o", str(folder / "build")] if command == "compile" else argv

    return make


def _set(path: str, value: object) -> Callable[[dict], None]:
    def edit(config: dict) -> None:
        *parents, last = path.split(".")
        node = config
        for key in parents:
            node = node[key]
        if value is _DROP:
            del node[last]
        else:
            node[last] = value

    return edit


_DROP = object()


def _model_file(name: str) -> Make:
    return lambda folder, study: FILE_FLAGS["estimate --model"](SPECIAL[name](folder), study)


def _vela_ini(text: str) -> Make:
    def make(folder: Path, study: Study) -> list[str]:
        (folder / "vela.ini").write_text(text)
        return ["estimate", "--model", str(study.model), "--config", str(folder / "vela.ini")]

    return make


def _passwd_as_vela_ini(folder: Path, study: Study) -> list[str]:
    return ["estimate", "--model", str(study.model), "--config", "/etc/passwd"]


def _database(damage: Callable[[Path], None], command: str) -> Make:
    """A copy of the study's database, damaged, under `command`."""

    def make(folder: Path, study: Study) -> list[str]:
        db = folder / "study.db"
        db.write_bytes((study.folder / "study.db").read_bytes())
        damage(db)
        url = f"sqlite:///{db}"
        return {
            "sweep": ["sweep", "--model", str(study.model), "--study", "s", "--out", str(folder)],
            "worker": ["worker", "--storage", url, "--study", "s"],
            "export": ["export", "--storage", url, "--study", "s", "--max-sram", "256KiB"],
            "report": ["report", "--storage", url, "--study", "s"],
        }[command] + {
            "sweep": ["--trials", "1"],
            "worker": ["--trials", "1"],
            "export": ["-o", str(folder / "cfg.json")],
            "report": ["--out", str(folder / "report")],
        }[command]

    return make


def _random_page(db: Path) -> None:
    data = bytearray(db.read_bytes())
    data[4096:8192] = os.urandom(4096)
    db.write_bytes(bytes(data))


def _edited_settings(db: Path) -> None:
    with sqlite3.connect(db) as con:
        con.execute(
            "UPDATE study_user_attributes SET value_json = ? WHERE key = 'dse.settings'",
            ('{"source_kind": "model"}',),
        )


def _emptied(db: Path) -> None:
    db.write_bytes(b"")


def _foreign(db: Path) -> None:
    db.unlink()
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE accounts (id INTEGER, owner TEXT)")


def _export(target: Callable[[Path], Path]) -> Make:
    def make(folder: Path, study: Study) -> list[str]:
        argv = ["export", "--storage", study.url, "--study", "s", "--max-sram", "256KiB"]
        return [*argv, "-o", str(target(folder))]

    return make


CONV_FLAGS = ("--no-cascade",)
REGRESSIONS: dict[str, tuple[Make, int, str]] = {
    # Corrupt models that reached TVM's importer or Vela with an uncaught exception type.
    "zero-point-2^63-1": (_field("conv", {"tensor0.zero_point[0]": (1 << 63) - 1}), 2, "zero"),
    "stride-0": (_field("conv", {"op0.Conv2DOptions.StrideW": 0}), 2, "stride"),
    "input-index-minus-1": (_field("conv", {"op0.inputs[0]": -1}), 2, "input"),
    "short-weight-buffer": (_field("conv", {"tensor1.Buffer": 2}), 2, "holds 64 bytes"),
    "scale-inf": (_field("conv", {"tensor0.scale[0]": math.inf}), 2, "scale"),
    "scale-nan": (_field("conv", {"tensor3.scale[0]": math.nan}), 2, "scale"),
    "dilation-3": (_field("dilated", {"op0.Conv2DOptions.DilationWFactor": 3}), 2, "dilation"),
    "dilation-64": (_field("dilated", {"op0.Conv2DOptions.DilationHFactor": 64}), 2, "dilation"),
    # Vela config errors that were not exit 2.
    "sram-1TiB": (_on_study_model("--sram", "1TiB"), 2, "--sram"),
    "sram-2^63": (_on_study_model("--sram", str(1 << 63)), 2, "--sram"),
    "proposal-region-1TiB": (_on_study_model("--proposal-region", "1TiB"), 2, "--proposal"),
    "config-pool-2^63": (_config(_set("sram_pool_bytes", 1 << 63)), 2, "sram_pool_bytes"),
    "dedicated-sram-on-u55": (_on_study_model("--memory-mode", "Dedicated_Sram"), 2, "Dedicated"),
    "passwd-as-vela-ini": (_passwd_as_vela_ini, 2, "/etc/passwd"),
    "vela-ini-no-section": (_vela_ini("core_clock=1e9\n"), 2, "vela.ini"),
    # The config loader.
    "config-100000-deep": (_config(lambda c: "[" * 100_000 + "]" * 100_000), 2, "cfg.json"),
    "config-5000-digits": (
        _config(lambda c: json.dumps(c).replace("1", "1" + "7" * 5000, 1)),
        2,
        "cfg.json",
    ),
    # The schema lets a config leave vela_config out: it means Vela's own vela.ini.
    "config-no-vela-config": (_config(_set("vela_config", _DROP)), 0, ""),
    # Counts that grew without bound.
    "stripe-factors-2^63": (_on_study_model("--stripe-factors", str(1 << 63)), 2, "stripe"),
    "stripe-factors-10^6": (_on_study_model("--stripe-factors", str(10**6)), 2, "stripe"),
    "config-stripe-factors-2^63": (
        _config(_set("cascader.options.stripe_factors", 1 << 63)),
        2,
        "stripe_factors",
    ),
    "plan-size-10^30": (_on_study_model("--max-plan-size", str(10**30)), 2, "plan"),
    "proposals-10^30": (_on_study_model("--max-proposals", str(10**30)), 2, "proposals"),
    # Special files as the model.
    "dev-zero": (_model_file("dev-zero"), 2, "/dev/zero"),
    "dev-urandom": (_model_file("dev-urandom"), 2, "/dev/urandom"),
    "fifo": (_model_file("fifo"), 2, "fifo"),
    "model-plus-2GiB": (_model_file("model-plus-2GiB"), 2, "padded"),
    # Output paths and storage URLs.
    "export-to-a-directory": (_export(lambda folder: folder), 2, "-o"),
    "export-unwritable": (_export(lambda folder: Path("/proc/cfg.json")), 2, "-o"),
    "storage-in-memory": (
        lambda folder, study: [
            "sweep",
            "--model",
            str(study.model),
            "--storage",
            "sqlite:///:memory:",
            "--trials",
            "1",
        ],
        2,
        "sqlite:///:memory:",
    ),
    # Damaged study databases under all four commands.
    **{
        f"{kind}-{command}": (_database(damage, command), 2, words)
        for kind, damage, words in (
            ("random-page", _random_page, "is damaged"),
            ("edited-settings", _edited_settings, "damaged stored data"),
            ("empty-db", _emptied, "is empty"),
            ("foreign-db", _foreign, "another program's database"),
        )
        for command in ("sweep", "worker", "export", "report")
    },
    # Accepted silently before.
    "softmax-beta-inf": (_field("pooled", {"op4.SoftmaxOptions.Beta": math.inf}), 2, "beta"),
    "weight-zero-point-128": (_field("conv", {"tensor1.zero_point[0]": 128}), 2, "zero"),
    "weight-zero-point-minus-129": (_field("conv", {"tensor1.zero_point[3]": -129}), 2, "zero"),
    "16-zero-points-for-15-scales": (
        _estimate(with_vector_length(base_model("conv"), "tensor1.scale[0]", 15)),
        2,
        "scale",
    ),
    # An operator whose result nothing reads: TVM warned of dead code on stderr.
    "dead-operators": (_field("chain", {"outputs[0]": 12}), 2, "no operator reads"),
    "batch-3": (_field("conv", {"tensor0.shape[0]": 3, "tensor3.shape[0]": 3}), 2, "batch"),
    "u65-with-u55-system": (
        _on_study_model(
            "--accelerator-config",
            "ethos-u65-256",
            "--system-config",
            "Ethos_U55_High_End_Embedded",
        ),
        2,
        "system",
    ),
}


# Found by the long run (`benchmarks/fuzz.py --seed 1`): category and seed.
FOUND_BY_THE_LONG_RUN = {
    "options-field-outside-its-table": ("model-estimate", 1000030),
    "sweep-trials-65537": ("flags", 1400020),
    "objective-value-text": ("study-db", 1500021),
    "finished-trial-fixed-params-text": ("study-db", 1500065),
    "stored-text-not-utf-8": ("study-db", 1500087),
    "graph-output-a-constant": ("model-sweep", 2100050),  # `--seed 2`
}


@pytest.mark.parametrize("name", sorted(FOUND_BY_THE_LONG_RUN))
def test_found_by_the_long_run(name: str, study: Study, tmp_path: Path) -> None:
    category, seed = FOUND_BY_THE_LONG_RUN[name]
    outcome = execute(CATEGORIES[category](seed, study), tmp_path)
    assert outcome.problems(allowed=(2,)) == [], outcome.stderr


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_named_regression(name: str, study: Study, tmp_path: Path) -> None:
    make, code, words = REGRESSIONS[name]
    outcome = run_case(make(tmp_path, study))
    assert outcome.problems(allowed=(code,)) == [], outcome.stderr
    assert words.lower() in outcome.stderr.lower(), outcome.stderr
    assert "root:x:" not in outcome.stderr, "a file's contents were shown"

"""A workload: the networks a product runs, each with a latency budget (and a weight), on a
list of NPU configurations. One study per (model, NPU configuration), grouped by the
workload's name, which each study stores with its model's budget (`WORKLOAD_ATTR`).

Given on the command line (`--model a.tflite --model b.tflite`, `--accelerator-config
ethos-u55-128,ethos-u85-256` or `all`, one `--budget-ms` for every model) or in a TOML file:

    name = "doorbell"                                  # optional: the file's stem
    accelerators = ["ethos-u55-128", "ethos-u85-256"]  # optional; or "all"
    [[model]]
    path = "kws.tflite"                                # relative to this file
    budget_ms = 10                                     # optional: no budget
    weight = 2.0                                       # optional: 1
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import optuna
import tomllib

from cascader.ethosu.errors import DeviceConfigError
from cascader.ethosu.vela_arch import VELA_ACCELERATORS, check_vela_accelerator
from dse.errors import BadInput
from dse.inputs import read_input

WORKLOAD_ATTR = "dse.workload"
ALL_ACCELERATORS = "all"
MAX_WORKLOAD_BYTES = 1 << 16
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class WorkloadModel:
    """One network of a workload: its file, its latency budget (None: none) and weight."""

    path: Path
    budget_s: float | None = None
    weight: float = 1.0

    @property
    def stem(self) -> str:
        return self.path.stem


@dataclass(frozen=True)
class Workload:
    name: str
    models: tuple[WorkloadModel, ...]
    accelerators: tuple[str, ...]

    def study_name(self, model: WorkloadModel, accelerator: str) -> str:
        return f"{self.name}:{model.stem}-{accelerator}"

    def attr(self, model: WorkloadModel) -> dict:
        """What a study of the workload stores of it (`WORKLOAD_ATTR`)."""
        return {
            "name": self.name,
            "model": model.stem,
            "budget_s": model.budget_s,
            "weight": model.weight,
        }


def accelerators_of(text: str | None, default: str) -> tuple[str, ...]:
    """`--accelerator-config` as a comma-separated list, or `all` of Vela's."""
    if text is None:
        return (default,)
    if text.strip() == ALL_ACCELERATORS:
        return VELA_ACCELERATORS
    names = [n.strip() for n in text.split(",") if n.strip()]
    try:
        for name in names:
            check_vela_accelerator(name)
    except DeviceConfigError as error:
        raise BadInput(f"{error} (or {ALL_ACCELERATORS!r})") from None
    if not names or len(set(names)) != len(names):
        raise BadInput(f"bad --accelerator-config {text!r}: name each configuration once")
    return tuple(names)


def _budget_s(value: object, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e9:
        raise BadInput(f"{where}: a latency budget is a positive number of milliseconds")
    return float(value) / 1e3


def from_command_line(
    models: list[str], accelerators: tuple[str, ...], budget_ms: float | None, name: str | None
) -> Workload:
    paths = [Path(m) for m in models]
    stems = [p.stem for p in paths]
    if len(set(stems)) != len(stems):
        raise BadInput("two --model files have the same name; a workload's studies are named by it")
    budget = _budget_s(budget_ms, "--budget-ms")
    return Workload(
        _checked_name(name or "-".join(stems)[:64], "--workload-name"),
        tuple(WorkloadModel(p, budget) for p in paths),
        accelerators,
    )


def _checked_name(name: str, where: str) -> str:
    if not _NAME.fullmatch(name):
        raise BadInput(
            f"{where} {name!r}: use letters, digits, '_', '.' or '-' (at most 64, no ':')"
        )
    return name


def from_file(path: Path, accelerators: tuple[str, ...] | None) -> Workload:
    """A TOML workload file (see the module docstring); `accelerators` given on the command
    line replace the file's."""
    text = read_input(path, MAX_WORKLOAD_BYTES, "workload", "see `dse sweep --help`")
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise BadInput(f"workload {path} is not a TOML file ({error})") from None
    unknown = set(data) - {"name", "accelerators", "model"}
    if unknown:
        raise BadInput(f"workload {path}: unknown key {sorted(unknown)[0]!r}")
    entries = data.get("model")
    if not isinstance(entries, list) or not entries:
        raise BadInput(f"workload {path}: give at least one [[model]] with a path")
    models = []
    for i, entry in enumerate(entries):
        where = f"workload {path}, model {i + 1}"
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise BadInput(f'{where}: give its path = "file.tflite"')
        extra = set(entry) - {"path", "budget_ms", "weight"}
        if extra:
            raise BadInput(f"{where}: unknown key {sorted(extra)[0]!r}")
        weight = entry.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
            raise BadInput(f"{where}: a weight is a positive number")
        model = (path.parent / entry["path"]).resolve()
        if not model.is_file():
            raise BadInput(f"{where}: {model} not found")
        models.append(WorkloadModel(model, _budget_s(entry.get("budget_ms"), where), weight))
    stems = [m.stem for m in models]
    if len(set(stems)) != len(stems):
        raise BadInput(f"workload {path}: two models have the same file name")
    if accelerators is None:
        given = data.get("accelerators", ["ethos-u55-256"])
        if given == ALL_ACCELERATORS:
            accelerators = VELA_ACCELERATORS
        elif isinstance(given, list) and all(isinstance(a, str) for a in given):
            accelerators = accelerators_of(",".join(given), "ethos-u55-256")
        else:
            raise BadInput(f'workload {path}: accelerators is a list of names or "all"')
    name = data.get("name", path.stem)
    if not isinstance(name, str):
        raise BadInput(f"workload {path}: name is text")
    return Workload(_checked_name(name, f"workload {path}: name"), tuple(models), accelerators)


def workload_studies(storage, name: str) -> list[optuna.Study]:
    """The studies of workload `name` in `storage`, by model then accelerator order."""
    found = []
    for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
        attr = summary.user_attrs.get(WORKLOAD_ATTR)
        if isinstance(attr, dict) and attr.get("name") == name:
            found.append(optuna.load_study(study_name=summary.study_name, storage=storage))
    if not found:
        raise BadInput(f"the storage holds no study of workload {name!r}; run `dse sweep` on it")
    return found

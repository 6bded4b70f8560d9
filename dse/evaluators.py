"""Picks the evaluator a study's settings call for; module-level so worker processes can
rebuild it from the stored settings alone."""

from __future__ import annotations

from pathlib import Path

from dse.errors import BadInput
from dse.graph_evaluator import graph_evaluator
from dse.objective import Evaluator
from dse.study import StudySettings, file_sha256


def source_file(settings: StudySettings) -> Path:
    """The study's model or graph file, checked to be the very file the study was made for."""
    path = Path(settings.source_path)
    if not path.is_file():
        raise BadInput(
            f"{settings.source_kind} {path} of this study is not on this machine; copy it to "
            "that path"
        )
    if file_sha256(path) != settings.source_sha256:
        raise BadInput(
            f"{path} has changed since the study was made (sha256 differs); restore it or "
            "start a new study"
        )
    return path


def make_evaluator(settings: StudySettings) -> Evaluator:
    path = source_file(settings)
    if settings.source_kind == "graph":
        return graph_evaluator(path)
    raise BadInput(
        "sweeping a .tflite model needs the TVM flow, which is not implemented yet; "
        "sweep a cascader graph with --graph G.json"
    )

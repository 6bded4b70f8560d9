"""Picks the evaluator a study's settings call for; module-level so worker processes can
rebuild it from the stored settings alone."""

from __future__ import annotations

from pathlib import Path

from dse.errors import BadInput
from dse.graph_evaluator import GraphEvaluator, graph_evaluator
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


def model_evaluator(settings: StudySettings, path: Path) -> GraphEvaluator:
    """The model through the flow (import, partition, legalize) into a cascader graph with
    the study's regions; the cascade region is resized per point."""
    from cascader.ethosu.memory import system_memory
    from cascader.flow.cascader_graph import (
        build_cascader_graph,
        graph_document,
        model_npu_functions,
    )
    from cascader.flow.frontend import load_tflite
    from cascader.flow.legalize import LegalizeError

    memory = system_memory(
        settings.accelerator,
        settings.system_config,
        settings.memory_mode,
        settings.sram_max,
        settings.vela_config,
    )
    try:
        functions = model_npu_functions(load_tflite(path))
    except LegalizeError as error:
        raise BadInput(f"{path}: {error}") from None
    graph = build_cascader_graph(functions, settings.accelerator)
    if not graph.parts:
        raise BadInput(f"{path}: no operator runs on the NPU, so there is nothing to explore")
    return GraphEvaluator(graph_document(graph, memory), str(path), memory.core_clock_hz)


def make_evaluator(settings: StudySettings) -> Evaluator:
    path = source_file(settings)
    if settings.source_kind == "graph":
        return graph_evaluator(path)
    return model_evaluator(settings, path)

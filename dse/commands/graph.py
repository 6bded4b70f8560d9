"""`dse graph`: write a model's cascader graph, with the system's regions, tensor homes and
cascader options, as graph JSON that `dse propose --graph` runs as is."""

from __future__ import annotations

import argparse

from cascader.core.graph_json import save_graph
from cascader.ethosu.errors import DeviceConfigError
from cascader.ethosu.memory import system_memory
from cascader.flow.cascader_graph import build_cascader_graph, graph_document, model_npu_functions
from cascader.flow.errors import ModelError
from cascader.flow.frontend import load_tflite
from cascader.flow.legalize import LegalizeError
from dse.errors import BadInput

DEFAULT_SRAM_POOL = 1 << 20  # the cascade region written into the graph; `propose --sram` resizes


def system_defaults(args: argparse.Namespace) -> tuple[str, str]:
    """The system config and memory mode: as given, else the accelerator family's default."""
    u65 = args.accelerator_config.startswith("ethos-u65")
    system_config = args.system_config or (
        "Ethos_U65_High_End" if u65 else "Ethos_U55_High_End_Embedded"
    )
    memory_mode = args.memory_mode or ("Dedicated_Sram" if u65 else "Shared_Sram")
    return system_config, memory_mode


def run(args: argparse.Namespace) -> int:
    system_config, memory_mode = system_defaults(args)
    sram = getattr(args, "sram", None) or DEFAULT_SRAM_POOL
    try:
        memory = system_memory(
            args.accelerator_config, system_config, memory_mode, sram, args.vela_config
        )
        functions = model_npu_functions(load_tflite(args.model))
        graph = build_cascader_graph(functions, args.accelerator_config)
    except (ModelError, DeviceConfigError) as error:
        raise BadInput(str(error)) from None
    except LegalizeError as error:
        raise BadInput(f"{args.model}: {error}") from None
    if not graph.parts:
        raise BadInput(f"{args.model}: no operator runs on the NPU, so there is nothing to cascade")
    try:
        save_graph(graph_document(graph, memory), args.output)
    except OSError as error:
        raise BadInput(f"cannot write {args.output}: {error.strerror}") from None
    print(
        f"wrote {args.output}: {len(graph.parts)} parts, {len(graph.tensors)} tensors "
        f"({args.accelerator_config}, {system_config}, {memory_mode})"
    )
    return 0

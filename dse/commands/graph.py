"""`dse graph`: write a model's cascader graph, with the system's regions, tensor homes and
cascader options, as graph JSON that `dse propose --graph` runs as is."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cascader.core.graph_json import FORMAT, graph_to_json
from cascader.ethosu.defaults import system_defaults
from cascader.ethosu.errors import DeviceConfigError
from cascader.ethosu.graph import build_cascader_graph, graph_document
from cascader.ethosu.memory import system_memory
from cascader.frontend.errors import ModelError
from cascader.frontend.legalize import LegalizeError
from cascader.frontend.passes import model_npu_functions
from cascader.frontend.tflite_import import load_tflite
from dse.errors import BadInput
from dse.output import json_of_format, write_file

DEFAULT_SRAM_POOL = 1 << 20  # the cascade region written into the graph; `propose --sram` resizes


def run(args: argparse.Namespace) -> int:
    system_config, memory_mode = system_defaults(
        args.accelerator_config, args.system_config, args.memory_mode
    )
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
    document = json.dumps(graph_to_json(graph_document(graph, memory)))
    write_file(Path(args.output), document, json_of_format(FORMAT), "graph JSON")
    print(
        f"wrote {args.output}: {len(graph.parts)} parts, {len(graph.tensors)} tensors "
        f"({args.accelerator_config}, {system_config}, {memory_mode})"
    )
    return 0

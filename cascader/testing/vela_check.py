"""Compile a TFLite model with Vela in-process and say what landed on the NPU.

Tests use this to prove generated models are valid Vela input and to see which operators Vela
keeps on the CPU.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

import tflite
from ethosu.vela import vela

_ETHOS_U_CUSTOM_CODE = b"ethos-u"
_BUILTIN_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}


@dataclass(frozen=True)
class VelaResult:
    """Outcome of one Vela compile.

    `npu_ops`/`cpu_ops` are Vela's own summary counts, taken after its graph rewriting (a
    SOFTMAX becomes many NPU operations). `cpu_op_kinds` lists the original operators left
    for the CPU in Vela's output file; `npu_subgraphs` counts its ethos-u custom operators.
    """

    npu_ops: int
    cpu_ops: int
    cpu_op_kinds: tuple[str, ...]
    npu_subgraphs: int
    log: str


def _summary_count(log: str, label: str) -> int:
    match = re.search(rf"^{label} operators = (\d+)", log, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"Vela printed no '{label} operators' line:\n{log}")
    return int(match.group(1))


def _output_ops(path: Path) -> tuple[tuple[str, ...], int]:
    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    cpu: list[str] = []
    npu = 0
    for s in range(model.SubgraphsLength()):
        graph = model.Subgraphs(s)
        for i in range(graph.OperatorsLength()):
            code = model.OperatorCodes(graph.Operators(i).OpcodeIndex())
            builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
            if (
                builtin == tflite.BuiltinOperator.CUSTOM
                and code.CustomCode() == _ETHOS_U_CUSTOM_CODE
            ):
                npu += 1
            else:
                cpu.append(_BUILTIN_NAMES[builtin])
    return tuple(cpu), npu


def compile_with_vela(
    flatbuffer: bytes,
    work_dir: Path,
    accelerator: str = "ethos-u55-256",
    name: str = "model",
) -> VelaResult:
    """Run Vela's command-line entry in this process; raises RuntimeError if it fails."""
    work_dir.mkdir(parents=True, exist_ok=True)
    model_path = work_dir / f"{name}.tflite"
    model_path.write_bytes(flatbuffer)
    out_dir = work_dir / "vela"
    argv = [str(model_path), "--output-dir", str(out_dir), "--accelerator-config", accelerator]
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            status = vela.main(argv)
    except (Exception, SystemExit) as e:
        raise RuntimeError(f"Vela failed: {e}\n{log.getvalue()}") from e
    text = log.getvalue()
    if status != 0:
        raise RuntimeError(f"Vela failed with status {status}:\n{text}")
    cpu_kinds, npu_subgraphs = _output_ops(out_dir / f"{name}_vela.tflite")
    return VelaResult(
        _summary_count(text, "NPU"), _summary_count(text, "CPU"), cpu_kinds, npu_subgraphs, text
    )

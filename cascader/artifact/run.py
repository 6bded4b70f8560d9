"""Run a Vela-format file (ours or Vela's) as a firmware build would: every `ethos-u` operator's
command stream on the simulator, every host operator on LiteRT (each as a one-operator
sub-model of the file), values passing through the arena as the offline allocation places
them; and compare what it computes with LiteRT on the original model, or with the integer
reference of a design point."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

from cascader.artifact.firmware_tflite import model_for_firmware
from cascader.estimate import PointConfig
from cascader.pipeline import Session
from cascader.simulator import FindingKind, SimulationError, VelaModel, run_vela_tflite
from cascader.simulator.driver import driver_refusals
from cascader.simulator.tflite_runner import OperatorInfo
from cascader.verify.boundaries import TfliteGraph
from cascader.verify.litert import KERNELS, DiffStats, diff_stats, litert_outputs, random_inputs
from cascader.verify.point_check import CompiledRunner
from cascader.verify.reference_kernels import reference_kernel_outputs
from cascader.verify.tolerance import litert_tolerance


class LiteRTHostOps:
    """Runs the host operators of one Vela-format file on LiteRT, interpreters kept per
    operator."""

    def __init__(self, data: bytes, kernels: str = "builtin") -> None:
        self.graph = TfliteGraph(schema.ModelT.InitFromPackedBuf(data, 0))
        self.kernels = kernels
        self._interpreters: dict[int, Interpreter] = {}

    def __call__(
        self, model: VelaModel, operator: OperatorInfo, inputs: list[np.ndarray]
    ) -> list[np.ndarray]:
        found = self._interpreters.get(operator.index)
        if found is None:
            ins = [t for t in operator.inputs if t >= 0 and model.tensors[t].data is None]
            sub = self.graph.sub_model(operator.index, ins, operator.outputs)
            found = Interpreter(
                model_content=sub, experimental_op_resolver_type=KERNELS[self.kernels]
            )
            found.allocate_tensors()
            self._interpreters[operator.index] = found
        # `inputs` are the operator's inputs but the omitted ones; the sub-model takes the
        # non-constant ones.
        present = [t for t in operator.inputs if t >= 0]
        values = [v for t, v in zip(present, inputs, strict=True) if model.tensors[t].data is None]
        for detail, value in zip(found.get_input_details(), values, strict=True):
            found.set_tensor(detail["index"], np.asarray(value).astype(detail["dtype"]))
        found.invoke()
        return [found.get_tensor(d["index"]) for d in found.get_output_details()]


@dataclass(frozen=True)
class SimulationCheck:
    """A Vela-format file simulated against LiteRT on the original model, per output over
    every sample, with the simulator's findings and the driver's refusals of the file."""

    samples: int
    outputs: tuple[DiffStats, ...]
    npu_ops: int
    ethos_u_ops: int
    findings: tuple[str, ...]
    seconds: float
    litert_kernels: str = "builtin"  # the LiteRT kernel set compared with
    litert_tolerance: int = 1  # steps the file may be from it (`cascader.verify.tolerance`)

    def max_abs_diff(self) -> int:
        return max(o.max_abs_diff for o in self.outputs)

    def to_json(self) -> dict:
        return {
            "samples": self.samples,
            "max_abs_diff": {"simulated_vs_litert": self.max_abs_diff()},
            "outputs": [o.to_json() for o in self.outputs],
            "npu_ops": self.npu_ops,
            "ethos_u_ops": self.ethos_u_ops,
            "findings": list(self.findings),
            "litert_kernels": self.litert_kernels,
            "litert_tolerance": self.litert_tolerance,
            "seconds": round(self.seconds, 3),
        }


class NotTheSameModel(ValueError):
    """The file is not a compiled form of the reference model."""


def _io(model: VelaModel, tensors: Sequence[int]) -> list[tuple[tuple[int, ...], str]]:
    return [(model.tensors[t].shape, model.tensors[t].dtype) for t in tensors]


def check_against_litert(
    data: bytes, reference: bytes, samples: int = 1, seed: int = 0, kernels: str = "auto"
) -> SimulationCheck:
    """Simulate the Vela-format file `data` on `samples` random inputs and compare it with
    LiteRT on the original model `reference`, with `kernels` ("auto": LiteRT's reference
    kernels, the NPU's arithmetic, when every operator of `data` is an ethos-u one and they
    run the model; its built-in ones otherwise, as for the host operators; see
    `cascader.verify.point_check`). Raises NotTheSameModel when their inputs and outputs differ
    and SimulationError for a file the simulator cannot run."""
    started = time.perf_counter()
    parsed = VelaModel.parse(data)
    if not any(op.kind == "ethos-u" for op in parsed.operators):
        raise SimulationError("it has no ethos-u operator; compile it with dse compile or vela")
    original = VelaModel.parse(reference)
    for what, ours, theirs in (
        ("inputs", _io(parsed, parsed.inputs), _io(original, original.inputs)),
        ("outputs", _io(parsed, parsed.outputs), _io(original, original.outputs)),
    ):
        if ours != theirs:
            raise NotTheSameModel(f"its {what} {ours} are not the reference's {theirs}")
    host = LiteRTHostOps(data)
    rng = np.random.default_rng(seed)
    drawn = [random_inputs(reference, rng) for _ in range(samples)]
    found = None
    if kernels == "auto":
        kernels = "builtin"
        if all(op.kind == "ethos-u" for op in parsed.operators):
            found = reference_kernel_outputs(reference, drawn)
            kernels = "builtin" if found is None else "reference"
    expected = found or [litert_outputs(reference, inputs, kernels) for inputs in drawn]
    simulated: list[list[np.ndarray]] = []
    findings = dict.fromkeys(str(f) for f in driver_refusals(data))
    npu_ops = 0
    for inputs in drawn:
        run = run_vela_tflite(parsed, inputs, host=host)
        broken = [f for f in run.findings if f.kind == FindingKind.MALFORMED_STREAM]
        if broken:  # not a stream a compiler wrote: a damaged file, not a wrong schedule
            raise SimulationError(f"its command stream is damaged: {broken[0]}")
        simulated.append(run.outputs)
        findings.update(dict.fromkeys(str(f) for f in run.findings))
        npu_ops = run.npu_ops
    outputs = tuple(
        diff_stats(k, [s[k] for s in simulated], [e[k] for e in expected])
        for k in range(len(parsed.outputs))
    )
    ethos_u = sum(1 for op in parsed.operators if op.kind == "ethos-u")
    return SimulationCheck(samples, outputs, npu_ops, ethos_u, tuple(findings),
                           time.perf_counter() - started, kernels,
                           litert_tolerance(reference, kernels))  # fmt: skip


def firmware_runner(session: Session, config: PointConfig) -> CompiledRunner:
    """The point compiled and packaged as the firmware gets it (`<model>_dse.tflite`), run on
    the simulator: for `cascader.verify.point_check.verify_point`'s command-stream check."""
    _, point, compiled = session.compile(config)
    data = model_for_firmware(session.model_bytes, compiled, point.schedule)
    parsed = VelaModel.parse(data)
    host = LiteRTHostOps(data)

    def run(inputs: list[np.ndarray]) -> tuple[list[np.ndarray], list[str]]:
        result = run_vela_tflite(parsed, inputs, host=host)
        return result.outputs, [str(f) for f in result.findings]

    return run

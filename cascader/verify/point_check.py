"""Check one design point's numbers three ways, on random inputs: (a) ai-edge-litert on the
original model, (b) the integer reference of the legalized NPU functions run op by op, and
(c) the point's stripe schedule executed stripe by stripe on that reference. Operators left on
the host run through litert in (b) and (c), fed by what our NPU side computed, so whole models
verify. (b) and (c) must agree bit for bit (the schedule moves data, it never changes
arithmetic); (b) is within one step of (a) where Vela's rounding differs from TFLite's.
A model whose NPU part is split into several functions runs in (c) one function at a time,
each on its own steps of the one schedule, the host ops between them on litert.

(a) runs LiteRT's reference kernels where they run the model (`kernels="auto"`, a model
entirely on the NPU): the NPU's arithmetic is theirs. Its built-in kernels round some ties
the other way (TRANSPOSE_CONV, some CONV_2D: a negative value exactly half way between two
steps goes up, not away from zero, benchmarks/simulator_vs_vela.md); one such step in a
U-Net's first up-sampling grows to 5-8 steps at its output through the convolutions after
it, on Vela's own output as on ours."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cascader.estimate import PointConfig
from cascader.pipeline import Session
from cascader.reference.run import ReferenceError
from cascader.reference.striped import StripedExecutor
from cascader.schedule.point_scheduler import Point
from cascader.verify.hybrid import HybridModel
from cascader.verify.litert import DiffStats, diff_stats, litert_outputs, random_inputs
from cascader.verify.reference_kernels import reference_kernel_outputs
from cascader.verify.tolerance import litert_tolerance


def _stats(s: DiffStats) -> dict:
    data = s.to_json()
    del data["output"]
    return data


# Runs a model's compiled form (its command streams, on the simulator) on one set of model
# inputs: its outputs, and one line per finding of the simulator.
CompiledRunner = Callable[[list[np.ndarray]], tuple[list[np.ndarray], list[str]]]


@dataclass(frozen=True)
class OutputCheck:
    """One model output over every sample: schedule vs reference, reference vs litert, and
    when the command streams ran, their outputs vs the reference."""

    index: int
    shape: tuple[int, ...]
    schedule_vs_reference: DiffStats
    reference_vs_litert: DiffStats
    command_stream_vs_reference: DiffStats | None = None

    def to_json(self) -> dict:
        data = {
            "index": self.index,
            "shape": list(self.shape),
            "schedule_vs_reference": _stats(self.schedule_vs_reference),
            "reference_vs_litert": _stats(self.reference_vs_litert),
        }
        if self.command_stream_vs_reference is not None:
            data["command_stream_vs_reference"] = _stats(self.command_stream_vs_reference)
        return data


@dataclass(frozen=True)
class Verification:
    samples: int
    outputs: tuple[OutputCheck, ...]
    point: Point
    stripes: int  # NPU stripes executed per sample, over every NPU function
    seconds: dict[str, float]
    npu_functions: int
    host_ops: tuple[str, ...]  # TFLite operators run by litert, in execution order
    findings: tuple[str, ...] = ()  # the simulator's, when the command streams ran
    litert_kernels: str = "builtin"  # the kernel set (a) ran: "reference" or "builtin"
    litert_tolerance: int = 1  # steps (b) may be from (a) (`cascader.verify.tolerance`)

    def max_abs_diff(self) -> dict[str, int]:
        found = {
            "schedule_vs_reference": max(
                o.schedule_vs_reference.max_abs_diff for o in self.outputs
            ),
            "reference_vs_litert": max(o.reference_vs_litert.max_abs_diff for o in self.outputs),
        }
        streams = [o.command_stream_vs_reference for o in self.outputs]
        if all(s is not None for s in streams):
            found["command_stream_vs_reference"] = max(s.max_abs_diff for s in streams)
        return found

    def to_json(self) -> dict:
        """DESIGN.md's `dse verify --json` object, plus the schedule's size, the split between
        NPU and host, and the timings."""
        return {
            "samples": self.samples,
            "max_abs_diff": self.max_abs_diff(),
            "outputs": [o.to_json() for o in self.outputs],
            "schedule": {
                "cascaded": self.point.cascade is not None,
                "fits": self.point.fits,
                "sram_used_bytes": self.point.schedule.sram_bytes,
                "stripes": self.stripes,
            },
            "npu_functions": self.npu_functions,
            "host_ops": list(self.host_ops),
            "findings": list(self.findings),
            "litert_kernels": self.litert_kernels,
            "litert_tolerance": self.litert_tolerance,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }


def verify_point(
    session: Session,
    config: PointConfig,
    samples: int = 1,
    seed: int = 0,
    kernels: str = "auto",
    compiled: CompiledRunner | None = None,
) -> Verification:
    """(a), (b) and (c) on `samples` random inputs for a point of the session's model (the
    cascader's options None: the copy-constants schedule); litert with `kernels` ("auto":
    its reference kernels, in a child process, when the model has no host operators and
    they run it; its built-in ones otherwise, host operators included); and (d), with
    `compiled`, the point's command streams on the simulator against (b). Raises
    ReferenceError for a model with nothing on the NPU or NPU tensors it cannot place in
    the TFLite graph, and StripeError when the schedule cannot run as written."""
    clock = time.perf_counter()
    seconds: dict[str, float] = {}

    def lap(what: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[what] = seconds.get(what, 0.0) + now - clock
        clock = now

    model = session.model_bytes
    functions = session.prepared_for(config).network.functions
    if not functions:
        raise ReferenceError("no operator runs on the NPU, there is no schedule to check")
    hybrid = HybridModel(model, functions, "builtin" if kernels == "auto" else kernels)
    point = session.schedule(config)
    executor = StripedExecutor(point.schedule)
    lap("build")
    rng = np.random.default_rng(seed)
    drawn = [random_inputs(model, rng) for _ in range(samples)]
    expected: list[list[np.ndarray]] | None = None
    if kernels == "auto":
        kernels = "builtin"
        if not hybrid.host_ops:
            expected = reference_kernel_outputs(model, drawn)
            kernels = "builtin" if expected is None else "reference"
    runs: list[tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]] = []
    streamed: list[list[np.ndarray]] = []
    findings: dict[str, None] = {}
    for sample, inputs in enumerate(drawn):
        theirs = litert_outputs(model, inputs, kernels) if expected is None else expected[sample]
        lap("litert")
        ours = hybrid.run(inputs)
        lap("reference")
        scheduled = hybrid.run(
            inputs, lambda index, _, values: executor.run_function(index, values)
        )
        lap("schedule")
        runs.append((theirs, ours, scheduled))
        if compiled is not None:
            outputs, found = compiled(inputs)
            streamed.append(outputs)
            findings.update(dict.fromkeys(found))
            lap("command_stream")

    outputs = tuple(
        OutputCheck(
            k,
            shape,
            diff_stats(k, [r[2][k] for r in runs], [r[1][k] for r in runs]),
            diff_stats(k, [r[1][k] for r in runs], [r[0][k] for r in runs]),
            diff_stats(k, [s[k] for s in streamed], [r[1][k] for r in runs]) if streamed else None,
        )
        for k, shape in enumerate(hybrid.output_shapes())
    )
    stripes = executor.stripes_run // samples
    return Verification(samples, outputs, point, stripes, seconds, len(functions),
                        hybrid.host_ops, tuple(findings), kernels,
                        litert_tolerance(model, kernels))  # fmt: skip

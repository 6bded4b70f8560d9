"""Check one design point's numbers three ways, on random inputs: (a) ai-edge-litert on the
original model, (b) the integer reference of the legalized NPU function run op by op, and
(c) the point's stripe schedule executed stripe by stripe on that reference. (b) and (c) must
agree bit for bit (the schedule moves data, it never changes arithmetic); (b) is within one
step of (a) where Vela's rounding differs from TFLite's."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from cascader.core.options import CascaderOptions
from cascader.ethosu.memory import SystemMemory
from cascader.flow.pipeline import Point, front_half, schedule_point
from cascader.reference.litert import DiffStats, diff_stats, litert_outputs, random_inputs
from cascader.reference.run import ModelReference
from cascader.reference.striped import StripedExecutor


@dataclass(frozen=True)
class OutputCheck:
    """One model output over every sample: schedule vs reference, reference vs litert."""

    index: int
    shape: tuple[int, ...]
    schedule_vs_reference: DiffStats
    reference_vs_litert: DiffStats

    def to_json(self) -> dict:
        def stats(s: DiffStats) -> dict:
            data = s.to_json()
            del data["output"]
            return data

        return {
            "index": self.index,
            "shape": list(self.shape),
            "schedule_vs_reference": stats(self.schedule_vs_reference),
            "reference_vs_litert": stats(self.reference_vs_litert),
        }


@dataclass(frozen=True)
class Verification:
    samples: int
    outputs: tuple[OutputCheck, ...]
    point: Point
    stripes: int  # NPU stripes executed per sample
    seconds: dict[str, float]

    def max_abs_diff(self) -> dict[str, int]:
        return {
            "schedule_vs_reference": max(
                o.schedule_vs_reference.max_abs_diff for o in self.outputs
            ),
            "reference_vs_litert": max(o.reference_vs_litert.max_abs_diff for o in self.outputs),
        }

    def to_json(self) -> dict:
        """DESIGN.md's `dse verify --json` object, plus the schedule's size and the timings."""
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
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }


def verify_model(
    model: bytes,
    memory: SystemMemory,
    options: CascaderOptions | None,
    samples: int = 1,
    seed: int = 0,
    kernels: str = "builtin",
    name: str = "model",
) -> Verification:
    """(a), (b) and (c) on `samples` random inputs for the point (memory, cascader options;
    None: the copy-constants schedule). Raises ReferenceError for a model with host ops and
    StripeError when the schedule cannot run as written."""
    clock = time.perf_counter()
    seconds: dict[str, float] = {}

    def lap(what: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[what] = seconds.get(what, 0.0) + now - clock
        clock = now

    reference = ModelReference.from_model(model, name)
    front = front_half(model, memory.accelerator)
    point = schedule_point(front, memory, options)
    executor = StripedExecutor(point.schedule)
    lap("build")
    rng = np.random.default_rng(seed)
    runs: list[tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]] = []
    for _ in range(samples):
        inputs = random_inputs(model, rng)
        theirs = litert_outputs(model, inputs, kernels)
        lap("litert")
        ours = reference(inputs)
        lap("reference")
        striped = executor.run(inputs)
        scheduled = [s.reshape(o.shape) for s, o in zip(striped, ours, strict=True)]
        lap("schedule")
        runs.append((theirs, ours, scheduled))
    outputs = tuple(
        OutputCheck(
            k,
            tuple(reference.output_shapes[k]),
            diff_stats(k, [r[2][k] for r in runs], [r[1][k] for r in runs]),
            diff_stats(k, [r[1][k] for r in runs], [r[0][k] for r in runs]),
        )
        for k in range(len(reference.output_shapes))
    )
    return Verification(samples, outputs, point, executor.stripes_run // samples, seconds)

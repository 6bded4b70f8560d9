"""Scores `vela` design points: Vela's own compiler (its C++ core, in this process) at the
point's arena size limit and scheduler options, its performance report as the score. This is
the second producer of points beside the cascader, and the only one on Ethos-U85."""

from __future__ import annotations

from pathlib import Path

from cascader.estimate import Estimate, OpEstimate
from cascader.ethosu.vela_arch import check_vela_system
from cascader.ethosu.vela_compiler import VelaCompiled, VelaError, compile_model
from cascader.frontend.tflite_check import ModelError, operator_origins, parse_tflite, read_model
from dse.cache_stats import CacheCounter
from dse.errors import BadInput
from dse.objective import MemoizedEvaluator
from dse.space import DesignPoint
from dse.study import StudySettings


class VelaEvaluator(MemoizedEvaluator):
    """One model on one device; the model is read and checked once (regor trusts its input:
    a damaged file can crash it, and the process with it)."""

    def __init__(self, settings: StudySettings, path: Path) -> None:
        super().__init__()
        self.settings = settings
        self.path = path
        try:
            self.model = read_model(path)
            self.origins = operator_origins(parse_tflite(self.model, str(path)))
        except ModelError as error:
            raise BadInput(str(error)) from None
        arch = check_vela_system(settings.accelerator, settings.system_config,
                                 settings.memory_mode, *self._ini())  # fmt: skip
        self.clock_hz = float(arch.core_clock)

    def _ini(self) -> tuple[str, ...]:
        return () if self.settings.vela_config is None else (self.settings.vela_config,)

    @property
    def cache(self) -> dict[str, CacheCounter]:
        """Hits and misses of the points Vela compiled for this evaluator."""
        return {"vela compiles": self._results}

    def _estimate(self, point: DesignPoint) -> Estimate:
        """Vela's schedule is a real one whatever the arena limit (a soft target in
        Shared_Sram): the point fits when its SRAM is within the study's range. A compile
        Vela refuses is an infeasible point carrying Vela's message."""
        s = self.settings
        options = point.vela_options(s.accelerator, s.system_config, s.memory_mode, s.vela_config)
        common = {
            "sram_pool_bytes": point.sram_pool_bytes,
            "options": None,
            "source": str(self.path),
            "model": self.path.name,
            "model_sha256": s.source_sha256,
            "accelerator": s.accelerator,
            "system_config": s.system_config,
            "memory_mode": s.memory_mode,
            "producer": "vela",
        }
        try:
            compiled = compile_model(self.model, options)
        except VelaError as error:
            return Estimate(fits=False, sram_used_bytes=None, total_cycles=None,
                            unscheduled=str(error), **common)  # fmt: skip
        return Estimate(
            fits=compiled.sram_used_bytes <= s.sram_max,
            sram_used_bytes=compiled.sram_used_bytes,
            total_cycles=float(compiled.total_cycles),
            npu_cycles=float(compiled.npu_cycles),
            macs=compiled.macs,
            inference_time_s=compiled.total_cycles / self.clock_hz,
            bytes=dict(compiled.access_bytes),
            ops=self._ops(compiled),
            **common,
        )

    def _ops(self, compiled: VelaCompiled) -> tuple[OpEstimate, ...]:
        """Vela's per-layer report as per-op estimates, named as the cascader's are (by
        their TFLite operator's output tensor). Vela reports cycles per operation, not its
        bytes per memory, nor its stripes (each operation counts as one)."""
        ops = []
        for layer in compiled.layers:
            origin = self.origins[layer.tflite_index]
            ops.append(OpEstimate(origin.tensor, layer.operator, 1, float(layer.cycles),
                                  layer.macs, {}, origin.index, origin.op))  # fmt: skip
        return tuple(ops)

"""Vela compiled in process, both cores, against the shared Vela 5.2 baseline table."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
from ethosu.vela import npu_performance

from cascader.ethosu.errors import DeviceConfigError
from cascader.ethosu.vela_baseline import run_vela

SHARED = Path(
    os.environ.get("CASCADER_SHARED", Path(__file__).resolve().parents[2].parent / "shared")
)
KWS = SHARED / "models" / "kws_dscnn.tflite"
needs_shared = pytest.mark.skipif(not KWS.is_file(), reason="shared/models not available")


def test_the_legacy_performance_model_we_call_is_in_the_pinned_vela():
    for name in ("measure_cycle_cost", "measure_element_access", "measure_mem2mem_cycles",
                 "update_summary_cycles", "_estimate_memory_transfer_efficiency",
                 "_estimate_output_cycles_per_element", "PerformanceQuery"):  # fmt: skip
        assert callable(getattr(npu_performance, name))


def _baseline(core: str, accelerator: str, model: str = "kws_dscnn") -> dict:
    with (SHARED / "baselines" / "vela_5.2.0.csv").open(newline="") as f:
        return next(
            r for r in csv.DictReader(f)
            if r["model"] == model and r["core"] == core and r["accelerator"] == accelerator
            and r["optimise"] == "Performance" and r["arena_cache_size_bytes"] == ""
        )  # fmt: skip


@needs_shared
@pytest.mark.parametrize("legacy", [False, True])
def test_both_cores_reproduce_the_shared_baseline(legacy):
    result = run_vela(KWS, "ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram",
                      legacy=legacy)  # fmt: skip
    row = _baseline("legacy-python" if legacy else "regor", "ethos-u55-256")
    assert result.core == row["core"]
    assert result.cycles_total == float(row["cycles_total"])
    assert result.cycles_npu == float(row["cycles_npu"])
    assert result.macs == int(row["nn_macs"])
    assert result.npu_ops == int(row["npu_ops_vela"])
    assert result.cpu_ops == int(row["cpu_ops_vela"])
    assert result.sram_used_bytes == round(float(row["sram_used_kib"]) * 1024)
    assert result.bytes["sram"] == float(row["sram_bytes_per_inf"])
    assert result.inference_time_s * 1e3 == pytest.approx(float(row["inference_time_ms"]))


@needs_shared
def test_a_dedicated_sram_arena_cache_is_a_hard_cap():
    result = run_vela(KWS, "ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram",
                      arena_cache_size=8 << 10)  # fmt: skip
    assert result.sram_used_bytes <= 8 << 10
    assert result.dram_used_bytes > 0


def test_bad_names_are_refused_before_vela_runs(tmp_path):
    model = tmp_path / "m.tflite"
    model.write_bytes(b"")
    with pytest.raises(DeviceConfigError, match="memory mode"):
        run_vela(model, "ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared")

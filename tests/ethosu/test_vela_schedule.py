"""Vela's own schedules replayed through our evaluator (real shared models, Vela's legacy core)."""

from __future__ import annotations

import pytest

from cascader.ethosu.perf import evaluate
from cascader.ethosu.vela_baseline import run_vela
from cascader.ethosu.vela_schedule import vela_scheduled_ops
from cascader.testing.shared import shared_dir

SHARED = shared_dir()
MODELS = SHARED / "models" if SHARED is not None else None
needs_shared = pytest.mark.skipif(
    MODELS is None or not (MODELS / "kws_dscnn.tflite").is_file(),
    reason="shared/models not available",
)
U55_128 = ("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram")
U65_256 = ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram")


@pytest.fixture(scope="module")
def kws():
    return vela_scheduled_ops(MODELS / "kws_dscnn.tflite", *U55_128)


@needs_shared
def test_the_in_process_compile_is_the_vela_cli_with_the_legacy_core(kws):
    cli = run_vela(MODELS / "kws_dscnn.tflite", *U55_128, legacy=True)
    assert kws.vela == cli
    assert sum(e.total_cycles for e in kws.estimates) == pytest.approx(cli.cycles_total)
    assert sum(e.macs for e in kws.estimates) == cli.macs
    assert kws.memory.sram_bytes == kws.memory.arch.arena_cache_size


@needs_shared
def test_every_vela_op_becomes_one_scheduled_op_with_its_stripes(kws):
    assert len(kws.ops) == len(kws.estimates)
    assert [op.name for op in kws.ops] == [e.name for e in kws.estimates]
    assert all(op.stripes for op in kws.ops)
    convs = [op for op in kws.ops if op.stripes[0].weights]
    assert convs and all(op.const_area in ("sram", "offchip_flash") for op in convs)
    # Vela copies some weights to SRAM (from flash) and reads the rest in place.
    assert {op.weight_source_area for op in convs} == {"offchip_flash", None}
    luts = [op for op in kws.ops if op.lut_bytes]
    assert [(op.lut_source_area, op.lut_bytes) for op in luts] == [("offchip_flash", 1024)]


@needs_shared
def test_ops_vela_runs_as_one_stripe_cost_exactly_what_vela_says(kws):
    """Same cost rules on the same inputs: weight copies, the softmax LUT DMA and its int32
    operands included. Only ops Vela splits into stripes may differ (it costs them whole)."""
    report = evaluate(kws.ops, kws.memory)
    single = [(o, e) for op, o, e in zip(kws.ops, report.ops, kws.estimates, strict=True)
              if len(op.stripes) == 1]  # fmt: skip
    assert len(single) > 30
    for ours, vela in single:
        assert ours.total_cycles == pytest.approx(vela.total_cycles, rel=1e-9), ours.name
        assert ours.macs == vela.macs


@needs_shared
def test_the_whole_network_is_within_three_percent_of_vela(kws):
    """On the shared models the replay is within 2.5% of Vela's total wherever Vela does not
    re-read a large IFM per OFM-depth slice (see benchmarks/fidelity_vela_replay.py)."""
    report = evaluate(kws.ops, kws.memory)
    assert report.total_cycles / kws.vela.cycles_total == pytest.approx(1.0, abs=0.03)
    layers = [(o, e) for o, e in zip(report.ops, kws.estimates, strict=True)
              if o.kind in ("conv2d", "depthwise")]  # fmt: skip
    assert len(layers) == 10
    for ours, vela in layers:
        assert ours.total_cycles == pytest.approx(vela.total_cycles, rel=0.25), ours.name


@needs_shared
def test_consecutive_compiles_in_one_process_do_not_share_vela_state():
    """Vela caches tensor ids by constant content process-wide; the MEAN's all-ones weights of
    a U55 compile used to leak into the next U65 compile of the same model and break it."""
    model = MODELS / "vww_mobilenet_v1_025.tflite"
    first = vela_scheduled_ops(model, *U55_128)
    second = vela_scheduled_ops(model, *U65_256)
    assert first.vela.accelerator == "ethos-u55-128"
    assert second.vela.accelerator == "ethos-u65-256"
    assert {op.weight_source_area for op in second.ops} - {None} == {"dram"}


def test_a_missing_model_is_reported_by_name(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"absent\.tflite"):
        vela_scheduled_ops(tmp_path / "absent.tflite", *U55_128)


@needs_shared
def test_vela_credits_cascaded_ops_with_a_weight_copy_it_never_counted() -> None:
    """ic_resnet8 on U55 at a 48 KiB arena: Vela cascades two convolutions and copies their
    weights whole, counts no copy for them, yet takes the part hidden under the previous op
    off their NPU cycles; the credit is exactly that part, and only cascaded ops get one."""
    u55_256 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    schedule = vela_scheduled_ops(MODELS / "ic_resnet8.tflite", *u55_256, 48 * 1024)
    credited = [e for e in schedule.estimates if e.dma_credit]
    assert len(credited) == 2 and all(e.cascade for e in credited)
    assert [e.dma_credit for e in credited] == [2912.0, 2928.0]
    assert schedule.vela.cycles_total == pytest.approx(129_211.5)

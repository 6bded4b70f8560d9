"""What makes a point cheap once a sweep has seen its neighbours changes no result: estimates
and command streams computed with every per-process memo warm are those computed cold, and
the remembered model digest is the digest of the very bytes asked about."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cascader.core.options import CascaderOptions
from cascader.ethosu import codegen, device, npu_op, perf
from cascader.flow import pipeline, schedule
from cascader.flow.frontend import load_tflite
from cascader.flow.pipeline import compile_model, estimate, front_half

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
U55 = ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
POINTS = [
    (96 * 1024, CascaderOptions()),
    (160 * 1024, CascaderOptions(enable_multi_dimensional_striping=True)),
    (512 * 1024, CascaderOptions(always_copy_size=0)),
    (128 * 1024, None),
]


def _forget_everything() -> None:
    for cache in (pipeline._CASCADES, pipeline._SCHEDULES, pipeline._SCORES, pipeline._NEEDS,
                  pipeline._FRONTS, pipeline._DIGESTS, codegen._ENCODED):  # fmt: skip
        cache.clear()
    codegen._BY_OP.clear()
    schedule._TRACES.clear()
    for memo in (schedule._fastest_block, device.valid_blocks, device._vela_block_config,
                 device._block_configs, perf._stripe_cost, codegen._strides, codegen._quant,
                 npu_op._described):  # fmt: skip
        memo.cache_clear()


def _estimates() -> list[dict]:
    return [estimate(str(EXAMPLE), *U55, pool, options, proposal_region_bytes=1 << 20).to_json()
            for pool, options in POINTS]  # fmt: skip


def _compiled(out: Path) -> dict[str, bytes]:
    compile_model(str(EXAMPLE), out, *U55, 160 * 1024, CascaderOptions(),
                  proposal_region_bytes=1 << 20)  # fmt: skip
    return {f.name: f.read_bytes() for f in sorted(out.iterdir())}


def test_warm_points_are_the_cold_points(tmp_path: Path) -> None:
    _forget_everything()
    _estimates()  # warms every memo with these and neighbouring points
    warm = _estimates()
    warm_streams = _compiled(tmp_path / "warm")
    net = front_half(load_tflite(EXAMPLE), U55[0]).network
    assert net._read_boxes  # the schedules' box memo was used
    _forget_everything()
    cold = _estimates()
    assert json.dumps(warm, sort_keys=True) == json.dumps(cold, sort_keys=True)
    assert _compiled(tmp_path / "cold") == warm_streams


def test_remembered_box_reads_are_the_op_reads() -> None:
    pipeline._SCORES.clear()
    estimate(str(EXAMPLE), *U55, 160 * 1024, CascaderOptions(), proposal_region_bytes=1 << 20)
    net = front_half(load_tflite(EXAMPLE), U55[0]).network
    assert net._read_boxes
    for (part, ofm), found in list(net._read_boxes.items())[:2000]:
        assert found == schedule.input_boxes(net.ops[part], ofm)


def test_a_remembered_digest_belongs_to_the_same_bytes() -> None:
    model = load_tflite(EXAMPLE)
    assert pipeline._sha256(model) == hashlib.sha256(model).hexdigest()
    assert pipeline._sha256(model) is pipeline._sha256(model)  # remembered
    edited = bytearray(model)
    edited[-1] ^= 0xFF
    assert pipeline._sha256(edited) == hashlib.sha256(edited).hexdigest()
    edited[-1] ^= 0xFF
    copy = bytes(edited)  # equal contents, another object: hashed on its own
    assert copy is not model and pipeline._sha256(copy) == pipeline._sha256(model)

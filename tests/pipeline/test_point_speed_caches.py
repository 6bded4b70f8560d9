"""What makes a point cheap once a sweep has seen its neighbours changes no result: estimates
and command streams computed with every per-process memo warm are those computed cold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascader.artifact.build import write_build
from cascader.core.options import CascaderOptions
from cascader.estimate import Device, PointConfig
from cascader.ethosu import weights
from cascader.ir.boxes import input_boxes
from cascader.memo import caches_on, clear_module_memos
from cascader.pipeline import Session

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
U55 = Device("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram")
POINTS = [
    (96 * 1024, CascaderOptions()),
    (160 * 1024, CascaderOptions(enable_multi_dimensional_striping=True)),
    (512 * 1024, CascaderOptions(always_copy_size=0)),
    (128 * 1024, None),
]


def _forget_device_memos() -> None:
    """The Ethos-U device model's memos, shared by every session in the process."""
    clear_module_memos()
    weights._BY_OP.clear()


def _estimates(session: Session) -> list[dict]:
    return [
        session.score(PointConfig(pool, options, 1 << 20)).to_json() for pool, options in POINTS
    ]


def _compiled(session: Session, out: Path) -> dict[str, bytes]:
    estimate, point, compiled = session.compile(PointConfig(160 * 1024, CascaderOptions(), 1 << 20))
    write_build(out, session.model_bytes, EXAMPLE.stem, estimate, point, compiled)
    return {f.name: f.read_bytes() for f in sorted(out.iterdir())}


def test_warm_points_are_the_cold_points(tmp_path: Path) -> None:
    _forget_device_memos()
    warmed = Session(EXAMPLE, U55)
    _estimates(warmed)  # warms every memo with these and neighbouring points
    warm = _estimates(warmed)
    warm_streams = _compiled(warmed, tmp_path / "warm")
    if caches_on():
        assert warmed.prepared.network._read_boxes  # the schedules' box memo was used
        assert warmed.scheduler.cascades.hits and warmed.scores.hits  # and the session's
    _forget_device_memos()
    fresh = Session(EXAMPLE, U55)
    cold = _estimates(fresh)
    assert json.dumps(warm, sort_keys=True) == json.dumps(cold, sort_keys=True)
    assert _compiled(fresh, tmp_path / "cold") == warm_streams


@pytest.mark.caches
def test_remembered_box_reads_are_the_op_reads() -> None:
    session = Session(EXAMPLE, U55)
    session.score(PointConfig(160 * 1024, CascaderOptions(), 1 << 20))
    net = session.prepared.network
    assert net._read_boxes
    for (part, ofm), found in list(net._read_boxes.items())[:2000]:
        assert found == input_boxes(net.ops[part], ofm)

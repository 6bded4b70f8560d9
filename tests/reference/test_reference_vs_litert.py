"""The integer reference of the legalized NPU functions against ai-edge-litert on the original
model: every builder case, the example network and the shared models, two random inputs each
(one for MobileNetV2 at 224x224)."""

from __future__ import annotations

from pathlib import Path

import pytest
from reference_cases import legalized_case

from cascader.testing.networks import CATALOGUE
from cascader.testing.shared import shared_dir
from cascader.verify.litert import compare_with_litert

_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mobilenet_like_96.tflite"
_SHARED_MODELS = (
    "ad_autoencoder",
    "ic_resnet8",
    "kws_dscnn",
    "vww_mobilenet_v1_025",
    "mobilenet_v2_100_224",
)
# Off by at most one step against litert's reference kernels, for known rounding reasons.
_ONE_STEP = {
    # litert's reference FULLY_CONNECTED rounds once; the NPU (and the optimised kernel) twice.
    "FULLY_CONNECTED": "reference kernel rounds once",
    "FULLY_CONNECTED-1x1-4d-input": "reference kernel rounds once",
}


@pytest.mark.parametrize("case", sorted(CATALOGUE))
def test_builder_case_matches_litert_reference_kernels(case: str, record_property) -> None:
    built = legalized_case(case)
    stats = compare_with_litert(built.model, kernels="reference", reference=built.reference)
    record_property("accuracy", [s.to_json() for s in stats])
    allowed = 1 if case in _ONE_STEP else 0
    for s in stats:
        assert s.max_abs_diff <= allowed, s


def test_example_network_matches_litert() -> None:
    (stats,) = compare_with_litert(_EXAMPLE.read_bytes(), kernels="reference", name=_EXAMPLE.name)
    assert stats.max_abs_diff == 0, stats


@pytest.mark.parametrize("name", _SHARED_MODELS)
def test_shared_model_within_one_step_of_litert(name: str, record_property) -> None:
    """litert's reference kernels abort the process on some of these (its SOFTMAX over 1000
    classes does), so they compare with its built-in kernels, which round MEAN and some
    FULLY_CONNECTED outputs slightly differently."""
    root = shared_dir()
    path = root / "models" / f"{name}.tflite" if root else None
    if path is None or not path.is_file():
        pytest.skip("shared models not present")
    samples = 1 if name == "mobilenet_v2_100_224" else 2
    stats = compare_with_litert(path.read_bytes(), samples=samples, kernels="builtin", name=name)
    record_property("accuracy", [s.to_json() for s in stats])
    for s in stats:
        assert s.max_abs_diff <= 1, s
        assert s.exact >= 0.9, s

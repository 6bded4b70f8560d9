"""Every golden graph captured from TVM v0.18 reproduces its expected proposals exactly.

One order in the original is unspecified: the DP walks the closed plans of a part out of a
hash map, so when two proposals tie on (memory, cycles) at an intermediate part group, which
one survives the cull varies from run to run. In MobileNetV2 the tie is between plans {31}
and {33} and the merged plan {31, 33}; the merged one later leaves a 16-byte tensor counted
as live, so the final memories differ by 16 bytes. The three MobileNetV2 goldens do not
agree with each other on this (the 512 KiB run took the other order), so each golden is
matched under the order the original happened to use, and a test shows that the order is
the only difference.
"""

import json
import os
from pathlib import Path

import pytest

from cascader.core import cascade
from cascader.ethosu.graph_json import load_graph

SHARED = Path(
    os.environ.get("CASCADER_SHARED", Path(__file__).resolve().parents[2].parent / "shared")
)
GOLDEN = SHARED / "golden"
FILES = sorted(GOLDEN.glob("*.json")) if GOLDEN.is_dir() else []
# Goldens captured with the other (equally valid) order of equal-cost plans.
LATER_GROUPS_FIRST = {"mobilenet_v2_100_224_s1_p512k.json"}

pytestmark = pytest.mark.skipif(not FILES, reason=f"no golden graphs in {GOLDEN}")


def _run(path: Path, later_groups_first: bool):
    document = load_graph(path)
    result = cascade(
        document.graph,
        document.regions,
        document.home_map,
        document.options,
        later_groups_first=later_groups_first,
    )
    return result, document.extras["expected"]


def _costs(proposals):
    return [(p["memory_usage"], p["cycles"]) for p in proposals]


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_golden_graph_reproduces_expected(path):
    result, expected = _run(path, path.name in LATER_GROUPS_FIRST)
    got = result.to_json()
    assert len(got["proposals"]) == len(expected["proposals"])
    assert _costs(got["proposals"]) == _costs(expected["proposals"])
    assert got["chosen_index"] == expected["chosen_index"]
    # Every proposal covers every part exactly once, as the original's did.
    parts = len(json.loads(path.read_text())["parts"])
    for proposal in got["proposals"]:
        covered = sorted(i for plan in proposal["plans"] for i in plan["part_group"])
        assert covered == list(range(parts))


@pytest.mark.parametrize(
    ("name", "later_groups_first"),
    [("mobilenet_v2_100_224_s1_p512k.json", False), ("mobilenet_v2_100_224_s1_p1024k.json", True)],
)
def test_the_unspecified_order_only_shifts_memory_by_one_tensor(name, later_groups_first):
    if not (GOLDEN / name).exists():
        pytest.skip(f"{name} is not in {GOLDEN}")
    result, expected = _run(GOLDEN / name, later_groups_first)
    got = _costs(result.to_json()["proposals"])
    want = _costs(expected["proposals"])
    assert [c for _, c in got] == [c for _, c in want]
    assert result.chosen_index == expected["chosen_index"]
    shift = 16 if later_groups_first else -16
    assert [m - shift for m, _ in got] == [m for m, _ in want]

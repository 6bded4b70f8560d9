"""`dse propose` on a real golden graph and on bad input."""

import argparse
import json

import pytest

from cascader.core import graph_to_json
from cascader.ethosu.synthetic import GraphBuilder
from dse.commands import propose
from dse.errors import BadInput


@pytest.fixture
def graph_file(tmp_path):
    builder = GraphBuilder()
    x = builder.conv(builder.input(16, 16, 8), 16, kernel=3, stride=2)
    document = builder.build([builder.conv(builder.depthwise(x), 8)], sram_size=8192)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph_to_json(document)))
    return path


def _args(graph, **kw):
    return argparse.Namespace(
        graph=str(graph),
        sram=kw.get("sram"),
        option=kw.get("option", []),
        json=kw.get("json", True),
    )


def test_json_output(graph_file, capsys):
    assert propose.run(_args(graph_file)) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"proposals", "chosen_index", "seconds"}
    memories = [p["memory_usage"] for p in out["proposals"]]
    assert memories == sorted(memories)
    plan = out["proposals"][0]["plans"][0]
    assert set(plan) == {"part_group", "memory_usage", "cycles", "output_config"}
    assert set(plan["output_config"]) == {
        "tensor",
        "home_region",
        "state",
        "buffer_mode",
        "stripe_shapes",
        "copy_tensor",
        "copy_region",
    }


def test_sram_and_options_override(graph_file, capsys):
    propose.run(
        _args(graph_file, sram=1 << 20, option=["enable_striping=false", "max_proposals=2"])
    )
    out = json.loads(capsys.readouterr().out)
    assert len(out["proposals"]) <= 2
    # With a large region the chosen proposal is the last (fastest) one.
    assert out["chosen_index"] == len(out["proposals"]) - 1


def test_nothing_fits_still_prints_the_smallest(graph_file, capsys):
    assert propose.run(_args(graph_file, sram=16, json=False)) == 0
    assert "no proposal fits" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("colour=red", "unknown key 'colour'; valid keys: cascade_region"),
        ("max_proposals=x", "not an integer"),
        ("enable_striping=maybe", "not a boolean"),
        ("max_proposals", "expected key=value"),
    ],
)
def test_bad_options(graph_file, option, message):
    with pytest.raises(BadInput, match=message):
        propose.run(_args(graph_file, option=[option]))


def test_bad_graph_files(tmp_path):
    with pytest.raises(BadInput, match="not found"):
        propose.run(_args(tmp_path / "none.json"))
    (tmp_path / "x.json").write_text('{"format": "cascader-graph", "version": 2}')
    with pytest.raises(BadInput, match="version"):
        propose.run(_args(tmp_path / "x.json"))

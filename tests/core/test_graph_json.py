"""Graph JSON round trip and validation messages that name the bad field."""

import copy
import json

import pytest

from cascader.core import GraphFormatError, cascade, graph_to_json
from cascader.ethosu.graph_json import ethosu_graph_from_json as graph_from_json
from cascader.ethosu.graph_json import load_graph
from cascader.ethosu.synthetic import GraphBuilder


def _document():
    builder = GraphBuilder()
    x = builder.input(8, 8, 8)
    y = builder.depthwise(builder.conv(x, 16), 3, 2)
    return builder.build([builder.add(y, builder.conv(y, 16))], sram_size=65536)


def test_round_trip_preserves_the_graph_and_its_results(tmp_path):
    document = _document()
    data = graph_to_json(document)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(data))
    again = load_graph(path)
    assert graph_to_json(again) == data
    first = cascade(document.graph, document.regions, document.home_map, document.options)
    second = cascade(again.graph, again.regions, again.home_map, again.options)
    assert first.to_json()["proposals"] == second.to_json()["proposals"]


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.update(format="other"), "format"),
        (lambda d: d["tensors"][0].update(dtype="int7"), "tensors[0].dtype"),
        (lambda d: d["tensors"][1].update(shape=[1, "a"]), "tensors[1].shape[1]"),
        (lambda d: d["tensors"][0].update(size=3), "tensors[0].size"),
        (
            lambda d: d["parts"][0]["propagators"][0]["offset"].pop(),
            "parts[0].propagators[0].offset",
        ),
        (lambda d: d["parts"][1].update(kind="gpu"), "parts[1].kind"),
        (lambda d: d["parts"][1].update(output=999), "parts[1].output"),
        (lambda d: d["parts"][1]["block_configs"].clear(), "parts[1].block_configs"),
        (lambda d: d["regions"]["SRAM"].update(read_bandwidth=0), "regions.SRAM.read_bandwidth"),
        (lambda d: d["home_map"].update({"0": ["DRAM"]}), "home_map.0"),
        (lambda d: d["options"].update(max_plans=3), "options.max_plans"),
        (lambda d: d["options"].update(max_proposals="many"), "options.max_proposals"),
        (lambda d: d.update(colour="red"), "colour"),
    ],
)
def test_validation_names_the_bad_field(edit, field):
    data = copy.deepcopy(graph_to_json(_document()))
    edit(data)
    with pytest.raises(GraphFormatError) as error:
        graph_from_json(data)
    assert str(error.value).startswith(f"{field}:")


def test_parts_out_of_order_are_rejected():
    data = graph_to_json(_document())
    data["parts"][0]["id"], data["parts"][1]["id"] = 1, 0
    with pytest.raises(GraphFormatError, match=r"^parts: parts are not in reverse topological"):
        graph_from_json(data)


def test_unreadable_files(tmp_path):
    with pytest.raises(GraphFormatError, match="cannot read"):
        load_graph(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(GraphFormatError, match="not valid JSON"):
        load_graph(tmp_path / "bad.json")


def test_a_cycle_through_two_parts_is_rejected():
    """Part 1 reads part 2's output and part 2 part 1's (issue 43)."""
    data = graph_to_json(_document())
    parts = {p["id"]: p for p in data["parts"]}
    first, second = parts[1], parts[2]
    first["inputs"][0], second["inputs"][0] = second["output"], first["output"]
    with pytest.raises(GraphFormatError, match=r"^parts: parts are not in reverse topological"):
        graph_from_json(data)


def _set_transform(d, value):
    d["parts"][0]["propagators"][0]["transform"][0][0] = value


def _set_bandwidth(d, value):
    d["regions"]["SRAM"]["read_bandwidth"] = value


def _set_shape(d, value):
    d["tensors"][0]["shape"][0] = int(value)


def _set_offset(d, value):
    d["parts"][0]["propagators"][0]["offset"][0] = int(value)


@pytest.mark.parametrize("value", [1e308, 1e30, -1e30, 2**62])
@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_set_transform, "parts[0].propagators[0].transform[0][0]"),
        (_set_bandwidth, "regions.SRAM.read_bandwidth"),
        (_set_shape, "tensors[0].shape[0]"),
        (_set_offset, "parts[0].propagators[0].offset[0]"),
    ],
    ids=["transform", "bandwidth", "shape", "offset"],
)
def test_every_number_is_bounded(value, edit, field):
    """No number a product or quotient of which overflows gets in (issue 43: 1e308 in a
    transform raised OverflowError, 1e30 gave NaN casts)."""
    data = copy.deepcopy(graph_to_json(_document()))
    edit(data, value)
    with pytest.raises(GraphFormatError) as error:
        graph_from_json(data)
    assert str(error.value).startswith(f"{field}:")


def test_a_tiny_bandwidth_is_refused():
    data = copy.deepcopy(graph_to_json(_document()))
    _set_bandwidth(data, 1e-300)
    with pytest.raises(GraphFormatError, match=r"^regions.SRAM.read_bandwidth: must be at least"):
        graph_from_json(data)

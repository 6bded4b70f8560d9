"""The cascader core: stripes, plans and proposals, device-neutral and runnable without TVM
(a device's parts and costs come from above: `cascader.ethosu`)."""

from cascader.core.cascade import CascadeResult, cascade
from cascader.core.errors import GraphFormatError
from cascader.core.graph import CascaderGraph
from cascader.core.graph_json import GraphDocument, graph_from_json, graph_to_json, load_graph
from cascader.core.memory_region import MemoryRegion
from cascader.core.options import CascaderOptions

__all__ = [
    "CascadeResult",
    "CascaderGraph",
    "CascaderOptions",
    "GraphDocument",
    "GraphFormatError",
    "MemoryRegion",
    "cascade",
    "graph_from_json",
    "graph_to_json",
    "load_graph",
]

"""The lowering hook: workspace-pool checks, external functions lowered to PrimFuncs of extern
NPU calls compiled from that TIR, the copy-constants scheduler without the cascader, U65
cascading."""

from __future__ import annotations

import numpy as np
import pytest
from tvm import tirx

from cascader.core.options import CascaderOptions
from cascader.frontend.legalize import ethosu_functions
from cascader.frontend.partition import partition_for_ethosu
from cascader.frontend.tflite_import import import_tflite
from cascader.lowering.relax_to_tir import (
    MANY_POOLS,
    NO_POOL,
    EthosuTarget,
    LoweringError,
    compile,
    relax_to_tir,
    workspace_pool_bytes,
)
from cascader.lowering.tir_to_npu import npu_calls
from cascader.testing.networks import CATALOGUE


@pytest.fixture(scope="module")
def partitioned():
    return partition_for_ethosu(import_tflite(CATALOGUE["chain"]().build()))


def _pools(mod, *sizes: int):
    pools = [{"pool_name": f"SRAM{i}", "size_hint_bytes": size} for i, size in enumerate(sizes)]
    return mod.with_attr("workspace_memory_pools", pools)


def test_the_cascader_needs_exactly_one_workspace_pool(partitioned) -> None:
    with pytest.raises(LoweringError, match=NO_POOL):
        relax_to_tir(partitioned)
    with pytest.raises(LoweringError, match=MANY_POOLS):
        relax_to_tir(_pools(partitioned, 256 * 1024, 4096))
    assert workspace_pool_bytes(_pools(partitioned, 12345)) == 12345


def test_external_functions_become_prim_funcs_with_their_npu_program(partitioned) -> None:
    lowered = relax_to_tir(_pools(partitioned, 256 * 1024))
    (name, func) = ethosu_functions(partitioned)[0]
    prim = lowered[name]
    assert isinstance(prim, tirx.PrimFunc)
    assert str(lowered.attrs["device_contexts"][name]) == "ethos-u"
    assert "main" in [gv.name_hint for gv in lowered.functions]
    stream, constants, scratch = compile(name, func, EthosuTarget(), 256 * 1024)
    assert prim.attrs["ethos-u.constants"].numpy().tobytes() == constants
    assert prim.attrs["ethos-u.command_stream"].numpy().tobytes() == stream
    assert int(prim.attrs["ethos-u.input_size"]) == 32 * 32 * 3
    assert int(prim.attrs["ethos-u.output_size"]) == 10
    assert int(prim.attrs["ethos-u.scratch_size"]) == scratch
    assert 0 < scratch <= 256 * 1024
    assert len(prim.params) == 2  # the model's input and output


def test_the_prim_func_is_the_npu_program_as_extern_calls(partitioned) -> None:
    lowered = relax_to_tir(_pools(partitioned, 256 * 1024))
    (name, _) = ethosu_functions(partitioned)[0]
    allocations, calls = npu_calls(lowered[name])
    names = {str(call.args[0].value) for call in calls}
    assert names == {
        "ethosu_copy",  # weights and scale-bias into SRAM
        "ethosu_identity",  # the explicit PAD
        "ethosu_conv2d",
        "ethosu_depthwise_conv2d",
        "ethosu_unary_elementwise",  # hard swish's table
        "ethosu_pooling",  # max pool, mean
        "ethosu_fully_connected",
        "ethosu_binary_elementwise",  # softmax's decomposition
    }
    assert allocations and all("ethos-u.buffer" in a.annotations for a in allocations)


def test_a_pool_smaller_than_any_schedule_is_refused(partitioned) -> None:
    with pytest.raises(LoweringError, match="nothing fits in 4096 bytes; the smallest schedule"):
        relax_to_tir(_pools(partitioned, 4096))


def test_without_the_cascader_no_pool_is_needed(partitioned) -> None:
    lowered = relax_to_tir(partitioned, EthosuTarget(options=None))
    (name, _) = ethosu_functions(partitioned)[0]
    stream = lowered[name].attrs["ethos-u.command_stream"].numpy()
    assert stream.dtype == np.uint8 and stream.size > 0


def test_cascading_works_on_ethos_u65(partitioned) -> None:
    target = EthosuTarget("ethos-u65-256", options=CascaderOptions(enable_striping=True))
    lowered = relax_to_tir(_pools(partitioned, 64 * 1024), target)
    (name, _) = ethosu_functions(partitioned)[0]
    attrs = lowered[name].attrs
    assert 0 < int(attrs["ethos-u.scratch_size"]) <= 64 * 1024  # the SRAM cascade region
    assert int(attrs["ethos-u.arena_size"]) > 0  # feature maps homed in DRAM


def test_functions_of_different_models_do_not_share_proposals(partitioned) -> None:
    """The pipeline caches the cascader's proposals per model key: each external function
    gets its own (a shared key handed one model's proposals to another)."""
    other = partition_for_ethosu(import_tflite(CATALOGUE["branches"]().build()))
    relax_to_tir(_pools(partitioned, 256 * 1024))
    lowered = relax_to_tir(_pools(other, 256 * 1024))
    (name, func) = ethosu_functions(other)[0]
    stream, _, _ = compile(name, func, EthosuTarget(), 256 * 1024)
    assert lowered[name].attrs["ethos-u.command_stream"].numpy().tobytes() == stream

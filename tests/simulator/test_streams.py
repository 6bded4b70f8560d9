"""Streams the simulator must refuse or flag: truncated streams and payloads, unknown
opcodes, missing STOP, out-of-region accesses and uninitialised reads, on hand-written raw
streams and on Vela's driver payloads."""

from __future__ import annotations

import numpy as np
import pytest
from ethosu.vela.api import NpuAccelerator, npu_create_driver_payload
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1

from cascader.simulator import (
    FindingKind,
    RegionImage,
    SimulationError,
    TensorPlacement,
    read_tensor,
    simulate,
    write_tensor,
)
from cascader.simulator.payload import parse_payload, replace_stream


def c0(op: cmd0, param: int = 0) -> list[int]:
    return [op.value | (param & 0xFFFF) << 16]


def c1(op: cmd1, data: int, param: int = 0) -> list[int]:
    return [op.value | 0x4000 | (param & 0xFFFF) << 16, data & 0xFFFFFFFF]


def dma(src: int, dst: int, length: int, src_region: int = 0, dst_region: int = 1) -> list[int]:
    return [
        *c0(cmd0.NPU_SET_DMA0_SRC_REGION, src_region),
        *c1(cmd1.NPU_SET_DMA0_SRC, src),
        *c0(cmd0.NPU_SET_DMA0_DST_REGION, dst_region),
        *c1(cmd1.NPU_SET_DMA0_DST, dst),
        *c1(cmd1.NPU_SET_DMA0_LEN, length),
        *c0(cmd0.NPU_OP_DMA_START),
        *c0(cmd0.NPU_OP_DMA_WAIT),
    ]


def stream(words: list[int]) -> bytes:
    return np.array(words, "<u4").tobytes()


STOP = c0(cmd0.NPU_OP_STOP, 0xFFFF)


def regions() -> dict[int, RegionImage]:
    return {0: RegionImage.from_bytes(bytes(range(64))), 1: RegionImage.empty(64)}


def kinds(result) -> list[FindingKind]:
    return [f.kind for f in result.findings]


def test_dma_copies_bytes_and_their_written_mask() -> None:
    result = simulate(stream(dma(16, 8, 32) + STOP), regions(), "ethos-u55-256")
    assert result.ok and result.dma_ops == 1
    arena = result.regions[1]
    assert arena.data[8:40].tobytes() == bytes(range(16, 48))
    assert arena.written[8:40].all() and not arena.written[:8].any()


def test_out_of_region_access_is_reported() -> None:
    result = simulate(stream(dma(48, 48, 32) + STOP), regions(), "ethos-u55-256")
    messages = [str(f) for f in result.findings]
    assert kinds(result) == [FindingKind.OUT_OF_REGION, FindingKind.OUT_OF_REGION]
    assert "outside region 0" in messages[0] and "outside region 1" in messages[1]


def test_unknown_region_is_reported() -> None:
    result = simulate(stream(dma(0, 0, 16, dst_region=5) + STOP), regions(), "ethos-u55-256")
    assert kinds(result) == [FindingKind.UNKNOWN_REGION]


def test_copy_of_unwritten_bytes_is_not_a_read_but_their_use_is() -> None:
    # Copy 16 unwritten arena bytes to another place, then an elementwise op reads them.
    words = dma(0, 32, 16, src_region=1, dst_region=1)
    words += [
        *c0(cmd0.NPU_SET_IFM_REGION, 1),
        *c1(cmd1.NPU_SET_IFM_BASE0, 32),
        *c1(cmd1.NPU_SET_IFM_STRIDE_X, 16),
        *c1(cmd1.NPU_SET_IFM_STRIDE_Y, 16),
        *c0(cmd0.NPU_SET_IFM_DEPTH_M1, 15),
        *c0(cmd0.NPU_SET_IFM_PRECISION, 1),
        *c0(cmd0.NPU_SET_OFM_REGION, 1),
        *c1(cmd1.NPU_SET_OFM_BASE0, 0),
        *c1(cmd1.NPU_SET_OFM_STRIDE_X, 16),
        *c1(cmd1.NPU_SET_OFM_STRIDE_Y, 16),
        *c0(cmd0.NPU_SET_OFM_DEPTH_M1, 15),
        *c0(cmd0.NPU_SET_OFM_PRECISION, 1),
        *c0(cmd0.NPU_SET_ACTIVATION_MIN, -128),
        *c0(cmd0.NPU_SET_ACTIVATION_MAX, 127),
        *c0(cmd0.NPU_SET_IFM2_BROADCAST, 0x80),  # scalar IFM2
        *c0(cmd0.NPU_SET_IFM2_PRECISION, 1),
        *c0(cmd0.NPU_SET_IFM2_SCALAR, 3),
        *c0(cmd0.NPU_OP_ELEMENTWISE, 4),  # MAX
    ]
    result = simulate(stream(words + STOP), regions(), "ethos-u55-256")
    assert kinds(result) == [FindingKind.UNINITIALISED_READ]
    assert "IFM reads 16 bytes [0x20, 0x30)" in str(result.findings[0])
    assert result.npu_ops == 1


def test_truncated_command_stream() -> None:
    words = dma(0, 0, 16)[:-3]  # ends inside NPU_SET_DMA0_LEN
    result = simulate(stream(words), regions(), "ethos-u55-256")
    assert FindingKind.MALFORMED_STREAM in kinds(result)
    assert any("ends inside a command" in str(f) for f in result.findings)
    assert any("without NPU_OP_STOP" in str(f) for f in result.findings)


def test_truncated_driver_payload() -> None:
    payload = npu_create_driver_payload(dma(0, 0, 16) + STOP, NpuAccelerator.Ethos_U55_256)
    result = simulate(payload[:-12], regions())
    assert result.accelerator == "ethos-u55-256"
    assert any("COMMAND_STREAM action" in str(f) for f in result.findings)


def test_unknown_opcode() -> None:
    result = simulate(stream([0x0077, *STOP]), regions(), "ethos-u55-256")
    assert kinds(result) == [FindingKind.UNSUPPORTED]
    assert "UNKNOWN_CMD0_0x077" in str(result.findings[0])


def test_unsupported_register_value() -> None:
    words = c0(cmd0.NPU_SET_ACTIVATION, 3) + c0(cmd0.NPU_OP_ELEMENTWISE, 4)  # TANH
    result = simulate(stream(words + STOP), regions(), "ethos-u55-256")
    assert kinds(result) == [FindingKind.UNSUPPORTED]
    assert "TANH" in str(result.findings[0])


def test_strict_raises_on_the_first_finding() -> None:
    with pytest.raises(SimulationError, match="UNKNOWN_CMD0"):
        simulate(stream([0x0077, *STOP]), regions(), "ethos-u55-256", strict=True)


def test_driver_payload_round_trip() -> None:
    words = dma(0, 0, 16) + STOP
    payload = npu_create_driver_payload(words, NpuAccelerator.Ethos_U65_256)
    parsed = parse_payload(payload)
    assert parsed.accelerator == "ethos-u65-256"
    assert parsed.streams[0].tolist() == words
    assert parse_payload(replace_stream(payload, STOP)).streams[0].tolist() == STOP


def test_regions_are_copied_and_aliases_kept() -> None:
    arena = RegionImage.empty(64)
    given = {0: RegionImage.from_bytes(bytes(range(64))), 1: arena, 2: arena}
    result = simulate(stream(dma(0, 0, 16, dst_region=2) + STOP), given, "ethos-u55-256")
    assert not arena.written.any()
    assert result.regions[1] is result.regions[2]
    assert result.regions[1].written[:16].all()


@pytest.mark.parametrize("layout", ["NHWC", "NHCWB16"])
def test_tensor_helpers(layout: str) -> None:
    image = RegionImage.empty(2048)
    placement = TensorPlacement(1, 64, (1, 3, 4, 20), "int8", layout)
    values = np.arange(240, dtype=np.int64).reshape(1, 3, 4, 20) % 256 - 128
    write_tensor(image, placement, values)
    back, complete = read_tensor(image, placement)
    assert complete and back.dtype == np.int8
    np.testing.assert_array_equal(back, values)
    # NHCWB16 leaves the padding lanes of the last brick unwritten
    assert int(image.written.sum()) == 240
    assert placement.nbytes == (3 * 4 * 32 if layout == "NHCWB16" else 240)


def strided(src: int, dst: int, length: int, size0: int, skip0: int, src_mode: int,
            dst_mode: int = 0, size1: int = 1, skip1: int = 0) -> list[int]:  # fmt: skip
    """A DMA of `size1` planes of `size0` lines of `length` bytes, the strided side skipping
    `skip0` bytes after each line and `skip1` after each plane."""
    return [
        *c0(cmd0.NPU_SET_DMA0_SRC_REGION, 0 | src_mode << 9),
        *c1(cmd1.NPU_SET_DMA0_SRC, src),
        *c0(cmd0.NPU_SET_DMA0_DST_REGION, 1 | dst_mode << 9),
        *c1(cmd1.NPU_SET_DMA0_DST, dst),
        *c1(cmd1.NPU_SET_DMA0_LEN, length),
        *c0(cmd0.NPU_SET_DMA0_SIZE0, size0),
        *c1(cmd1.NPU_SET_DMA0_SKIP0, skip0),
        *c0(cmd0.NPU_SET_DMA0_SIZE1, size1),
        *c1(cmd1.NPU_SET_DMA0_SKIP1, skip1),
        *c0(cmd0.NPU_OP_DMA_START),
        *c0(cmd0.NPU_OP_DMA_WAIT),
    ]


def test_u65_runs_a_2d_dma_gathering_lines() -> None:
    # Three lines of 4 bytes, 10 bytes apart in the source, packed in the destination.
    result = simulate(stream(strided(2, 0, 4, 3, 6, src_mode=1) + STOP), regions(), "ethos-u65-256")
    assert result.ok and result.dma_ops == 1
    expected = bytes([*range(2, 6), *range(12, 16), *range(22, 26)])
    assert result.regions[1].data[:12].tobytes() == expected
    assert result.regions[1].written[:12].all() and not result.regions[1].written[12:].any()


def test_u65_runs_a_3d_dma_scattering_planes() -> None:
    # Two planes of two 2-byte lines: lines 3 bytes apart, planes 8 bytes apart, from a
    # contiguous source into a strided destination.
    words = strided(0, 0, 2, 2, 1, src_mode=0, dst_mode=2, size1=2, skip1=2)
    result = simulate(stream(words + STOP), regions(), "ethos-u65-256")
    assert result.ok
    data, written = result.regions[1].data, result.regions[1].written
    for index, address in enumerate([0, 1, 3, 4, 8, 9, 11, 12]):
        assert data[address] == index and written[address]
    assert not written[[2, 5, 6, 7, 10]].any()


def test_u55_refuses_a_strided_dma() -> None:
    result = simulate(stream(strided(0, 0, 4, 3, 4, src_mode=1) + STOP), regions(), "ethos-u55-256")
    assert kinds(result) == [FindingKind.UNSUPPORTED]
    assert "2D DMA on ethos-u55-256" in str(result.findings[0])

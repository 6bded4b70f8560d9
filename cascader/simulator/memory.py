"""Memory images of the regions the driver sets up, with a per-byte "written" mask.

A region is what one base pointer of the driver's table points at: its bytes, its declared
size and which bytes hold a value (the initial image, or any command's write since). Every
access is checked against the declared size and the mask; problems go to a `Reporter`, the
access goes on (out-of-region bytes read as 0 and are not written), so one run lists every
problem. SHRAM (the DMA's internal destination, where LUTs live) is one more region.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from cascader.simulator.errors import FindingKind

SHRAM = -1  # the region key of the NPU's internal shared buffer


def region_name(region: int) -> str:
    return "SHRAM" if region == SHRAM else f"region {region}"


@dataclass(eq=False)
class RegionImage:
    """The bytes of one region, its declared size (= len(data)) and the initialised mask."""

    data: np.ndarray  # uint8
    written: np.ndarray  # bool, True where a byte holds a value

    def __post_init__(self) -> None:
        if self.data.dtype != np.uint8 or self.data.ndim != 1:
            raise ValueError("a region's data is a 1-D uint8 array")
        if self.written.shape != self.data.shape or self.written.dtype != np.bool_:
            raise ValueError("a region's written mask is a bool array of the data's shape")

    @classmethod
    def empty(cls, size: int) -> RegionImage:
        """`size` bytes nobody has written (an arena before inference)."""
        return cls(np.zeros(size, np.uint8), np.zeros(size, np.bool_))

    @classmethod
    def from_bytes(cls, content: bytes, size: int | None = None) -> RegionImage:
        """An image whose first len(content) bytes are initialised (constants, inputs); a
        larger declared `size` leaves the rest unwritten."""
        size = len(content) if size is None else size
        if size < len(content):
            raise ValueError(f"declared size {size} is below the {len(content)} bytes given")
        image = cls.empty(size)
        image.data[: len(content)] = np.frombuffer(content, np.uint8)
        image.written[: len(content)] = True
        return image

    @property
    def size(self) -> int:
        return int(self.data.size)

    def copy(self) -> RegionImage:
        return RegionImage(self.data.copy(), self.written.copy())

    def store(self, address: int, content: bytes | np.ndarray) -> None:
        """Initialise bytes from the host (an input tensor); raises outside the region."""
        raw = np.frombuffer(bytes(content), np.uint8) if isinstance(content, bytes) else content
        raw = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
        if address < 0 or address + raw.size > self.size:
            raise ValueError(
                f"{raw.size} bytes at {address:#x} do not fit a region of {self.size} bytes"
            )
        self.data[address : address + raw.size] = raw
        self.written[address : address + raw.size] = True


class Reporter:
    """Collects findings for the command being executed (set by the machine)."""

    def __init__(self, sink: Callable[[FindingKind, str], None]) -> None:
        self._sink = sink

    def report(self, kind: FindingKind, message: str) -> None:
        self._sink(kind, message)


def _span(addresses: np.ndarray) -> str:
    return f"[{int(addresses.min()):#x}, {int(addresses.max()) + 1:#x})"


class Memory:
    """The regions by base-pointer index, plus SHRAM, with checked gathers and scatters."""

    def __init__(self, regions: Mapping[int, RegionImage], shram: RegionImage) -> None:
        self.regions = dict(regions)
        self.regions[SHRAM] = shram

    def _region(self, region: int, what: str, reporter: Reporter) -> RegionImage | None:
        image = self.regions.get(region)
        if image is None:
            reporter.report(
                FindingKind.UNKNOWN_REGION, f"{what} uses {region_name(region)}, not set up"
            )
        return image

    def _inside(
        self, image: RegionImage, region: int, addresses: np.ndarray, what: str, reporter: Reporter
    ) -> np.ndarray:
        inside = (addresses >= 0) & (addresses < image.size)
        if not inside.all():
            outside = addresses[~inside]
            reporter.report(
                FindingKind.OUT_OF_REGION,
                f"{what} touches {outside.size} bytes {_span(outside)} outside "
                f"{region_name(region)} (size {image.size:#x})",
            )
        return inside

    def gather(
        self,
        region: int,
        addresses: np.ndarray,
        what: str,
        reporter: Reporter,
        check_initialised: bool = True,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The bytes at `addresses` (any shape) and their written mask; unreadable bytes are
        0 and unwritten. Reading an unwritten byte is reported unless the reader only moves
        it (a DMA copies the mask with the bytes)."""
        values = np.zeros(addresses.shape, np.uint8)
        written = np.zeros(addresses.shape, np.bool_)
        image = self._region(region, what, reporter)
        if image is None or addresses.size == 0:
            return values, written
        inside = self._inside(image, region, addresses, what, reporter)
        if inside.all():
            values = image.data[addresses]
            written = image.written[addresses]
        else:
            values[inside] = image.data[addresses[inside]]
            written[inside] = image.written[addresses[inside]]
        if check_initialised and not written[inside].all():
            unset = addresses[inside & ~written]
            reporter.report(
                FindingKind.UNINITIALISED_READ,
                f"{what} reads {unset.size} bytes {_span(unset)} of {region_name(region)} "
                f"that nothing wrote",
            )
        return values, written

    def scatter(
        self,
        region: int,
        addresses: np.ndarray,
        values: np.ndarray,
        what: str,
        reporter: Reporter,
        written: np.ndarray | None = None,
    ) -> None:
        """Write bytes (same shape as `addresses`); `written` carries a copied mask (a DMA
        moves uninitialised bytes as such), else every byte written becomes initialised."""
        image = self._region(region, what, reporter)
        if image is None or addresses.size == 0:
            return
        inside = self._inside(image, region, addresses, what, reporter)
        mask = np.ones(addresses.shape, np.bool_) if written is None else written
        if inside.all():
            image.data[addresses] = values
            image.written[addresses] = mask
        else:
            image.data[addresses[inside]] = values[inside]
            image.written[addresses[inside]] = mask[inside]

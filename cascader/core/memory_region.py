"""MemoryRegion: a memory the cascader can place tensors in, with its transfer characteristics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryRegion:
    """A named memory with its size (bytes) and bandwidths (bytes/cycle), latencies (cycles) and
    burst length (bytes). Frozen so regions can key caches and be shared between plans."""

    name: str
    size: int
    read_bandwidth: float
    write_bandwidth: float
    read_latency: int = 0
    write_latency: int = 0
    burst_length: int = 1

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "size": int(self.size),
            "read_bandwidth": self.read_bandwidth,
            "write_bandwidth": self.write_bandwidth,
            "read_latency": self.read_latency,
            "write_latency": self.write_latency,
            "burst_length": self.burst_length,
        }

    @classmethod
    def from_json(cls, data: dict) -> MemoryRegion:
        return cls(
            name=str(data["name"]),
            size=int(data["size"]),
            read_bandwidth=data["read_bandwidth"],
            write_bandwidth=data["write_bandwidth"],
            read_latency=int(data.get("read_latency", 0)),
            write_latency=int(data.get("write_latency", 0)),
            burst_length=int(data.get("burst_length", 1)),
        )

"""A bounded cache that forgets its least recently used entry first, counting its hits and
misses (the cache statistics a sweep prints are these counts)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class LruCache(OrderedDict):
    """At most `size` entries; `lookup` counts as a use, `keep` stores and evicts."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self.hits = 0
        self.misses = 0

    def lookup(self, key: object) -> Any:
        """The entry of `key` (None if absent), now the most recently used."""
        found = self.get(key)
        if found is not None:
            self.move_to_end(key)
            self.hits += 1
        else:
            self.misses += 1
        return found

    def keep(self, key: object, value: object) -> None:
        self[key] = value
        while len(self) > self.size:
            self.popitem(last=False)

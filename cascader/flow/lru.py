"""A bounded cache that forgets its least recently used entry first, for the flow's
per-process memos (models read, front halves, cascades, schedules, scores, plan records)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class LruCache(OrderedDict):
    """At most `size` entries; `lookup` counts as a use, `keep` stores and evicts."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def lookup(self, key: object) -> Any:
        """The entry of `key` (None if absent), now the most recently used."""
        found = self.get(key)
        if found is not None:
            self.move_to_end(key)
        return found

    def keep(self, key: object, value: object) -> None:
        self[key] = value
        while len(self) > self.size:
            self.popitem(last=False)

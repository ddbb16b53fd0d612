"""The ids `tables.stable_ids` gives a set of keys, kept up to date as keys come and go.

`stable_ids` hashes each key's canonical text to a starting slot and, taking the keys in
(hash, text) order, gives each the first free slot from there (linear probing, wrapping
around). The result depends only on the set of texts. `IdSpace` holds that result for a
changing set: after a batch of additions and removals it recomputes only the runs of
occupied slots the batch touched, which is exactly what the from-scratch assignment would
change. Why that is enough: a key's probe never crosses a free slot, so keys in a run that
stays separated from the batch's runs by free slots are placed as before; a re-placed key
that probes into a slot held by a key outside the runs merges that key's run into the
batch, and the whole merged run is placed again in (hash, text) order.
"""

from __future__ import annotations

from collections.abc import Iterable

from compiler.tables import text_hash


class IdSpace:
    def __init__(self, bits: int, reserved: Iterable[int] = ()):
        self.mask = (1 << bits) - 1
        self.fixed = set(reserved) | {0}
        self.at: dict[int, object] = {}  # slot -> key
        self.slot: dict[object, int] = {}  # key -> slot (its id)
        self.hashed: dict[object, tuple[int, str]] = {}  # key -> (start slot, text)

    def __len__(self) -> int:
        return len(self.slot)

    def _taken(self, i: int) -> bool:
        return i in self.at or i in self.fixed

    def _run(self, i: int) -> set:
        """The keys of the run of occupied slots around slot `i` (empty if `i` is free)."""
        keys: set = set()
        if not self._taken(i):
            return keys
        mask, j, n = self.mask, i, 0
        while self._taken(j) and n <= mask:  # left to the run's start
            j, n = (j - 1) & mask, n + 1
        j, n = (j + 1) & mask, 0
        while self._taken(j) and n <= mask:
            k = self.at.get(j)
            if k is not None:
                keys.add(k)
            j, n = (j + 1) & mask, n + 1
        return keys

    def update(self, added: dict[object, str], removed: Iterable[object]) -> dict:
        """Apply a batch: remove keys, add keys with their texts (a key may be in both, to
        change its text). Returns {key: its previous id, or None} for every key whose id is
        new or changed."""
        removed = [k for k in removed if k in self.slot]
        gone = set(removed)
        todo: set = set()
        for k in removed:
            todo |= self._run(self.slot[k])
        for k, text in added.items():
            if k in self.slot and k not in gone:
                raise KeyError(f"id key {k!r} added twice")
            todo |= self._run(text_hash(text, self.mask))
        before = {k: self.slot[k] for k in todo if k in self.slot}
        for k in removed:
            del self.at[self.slot.pop(k)]
            del self.hashed[k]
        for k, text in added.items():
            self.hashed[k] = (text_hash(text, self.mask), text)
        todo.difference_update(removed)
        todo |= set(added)
        if len(self.slot) + len(added) + len(self.fixed) > self.mask:
            raise OverflowError(f"more than {self.mask} ids needed in a "
                                f"{self.mask.bit_length()}-bit space")
        while True:
            for k in todo:
                s = self.slot.pop(k, None)
                if s is not None:
                    before.setdefault(k, s)
                    del self.at[s]
            merged = self._place(todo)
            if not merged:
                break
            todo |= merged
        return {k: before.get(k) for k in todo
                if k in added or before.get(k) != self.slot[k]}

    def _place(self, keys: set) -> set:
        """Place `keys` in (hash, text) order; if one probes into a key outside `keys`, undo
        and return that key's run (to be placed together)."""
        mask = self.mask
        placed = []
        hashed = self.hashed
        for k in sorted(keys, key=hashed.__getitem__):
            i = hashed[k][0]
            while i in self.fixed or i in self.at:
                other = self.at.get(i)
                if other is not None and other not in keys:
                    for p in placed:
                        del self.at[self.slot.pop(p)]
                    return self._run(i)
                i = (i + 1) & mask
            self.at[i] = k
            self.slot[k] = i
            placed.append(k)
        return set()

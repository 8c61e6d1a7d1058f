"""A run's records kept off the heap: memory stays flat as the number of attempts grows.

A 100,000-attempt run holds an attempt record and a grading record per attempt (1-2 KB of JSON
each, five to ten times that as Python dicts). :class:`RecordStore` is a mapping that keeps the
records, as JSON, in an unlinked temporary file (in the page cache, not in the process) and in
memory only where each one is: 8 bytes in an array, at a slot its key was given once by a
:class:`KeyIndex` that the run's stores share.

A store's :class:`Codec` is its boundary: values go in and come out as the codec's typed,
immutable records (a run's attempts, gradings and comparisons), decoded from their bytes once
per read, so a read record cannot be changed in place and silently lost. The default codec keeps
plain JSON objects (each read is a fresh dict).
"""

from __future__ import annotations

import os
import sys
import tempfile
from array import array
from collections.abc import Callable, Hashable, Iterable, Iterator, MutableMapping, Sequence
from typing import IO, Any, Generic, Protocol, TypeVar, overload

import orjson

from mst import fileio

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Codec(Protocol[V]):
    """How a store's values become JSON objects and back: one codec per kind of record."""

    def to_json(self, value: V) -> dict[str, Any]: ...

    def from_json(self, data: dict[str, Any]) -> V: ...


class JsonCodec:
    """Plain JSON objects, as they are."""

    @staticmethod
    def to_json(value: dict[str, Any]) -> dict[str, Any]:
        return value

    @staticmethod
    def from_json(data: dict[str, Any]) -> dict[str, Any]:
        return data


class RecordCodec(Generic[V]):
    """The codec of a record class with ``to_json()`` and a ``from_json`` class method."""

    __slots__ = ("_cls",)

    def __init__(self, cls: Any) -> None:
        self._cls = cls

    def to_json(self, value: V) -> dict[str, Any]:
        data: dict[str, Any] = value.to_json()  # type: ignore[attr-defined]
        return data

    def from_json(self, data: dict[str, Any]) -> V:
        value: V = self._cls.from_json(data)
        return value

_LEN_BITS = 32
_ABSENT = -1
_SHARED_SUMMARIES = 4096  # distinct summary values shared between records (endings repeat)


_TRIALS_PER_BLOCK = 8
_READ_AHEAD = 64 * 1024  # bytes read at once by a reader going through the records in order


def _block_of(trial: int) -> tuple[int, int, int]:
    """(block number, first trial, slots) of the block that holds ``trial``: trial 0 alone,
    trials 1-7, then eight trials a block. A run of one trial per case (100,000 cases, say) takes
    one slot per variant and case, not eight; a run of many trials still takes a block per eight."""
    if trial == 0:
        return 0, 0, 1
    high = trial // _TRIALS_PER_BLOCK + 1
    return (1, 1, _TRIALS_PER_BLOCK - 1) if high == 1 else (high, (high - 1) * _TRIALS_PER_BLOCK, _TRIALS_PER_BLOCK)


def _first_trial(high: int) -> int:
    return 0 if high == 0 else 1 if high == 1 else (high - 1) * _TRIALS_PER_BLOCK


_VARIANT_BITS = 16  # a block slot's owner, 4 bytes: variant number << 16 | block number
_MOST = 1 << _VARIANT_BITS  # variants, and blocks per variant and case (trials < 524,280)
_SLOTS = (1 << 31) - 1  # slots of one key index: kept in 4-byte arrays


class KeyIndex(Generic[K]):
    """Keys numbered in the order first seen, for stores that share them: a run's attempts and
    their gradings keep each key once.

    A trial key ``(variant, case, trial)`` takes a slot in a block of consecutive slots for its
    variant and case (see :func:`_block_of`): the index costs memory per case, not per attempt,
    and little per case. Each case id is numbered once (one dict entry, shared by the variants);
    a block's first slot is kept in an array per variant and block number, at the case's number
    (4 bytes); a slot's owner (its case's number, its variant's and its block's) in two arrays of
    4 bytes a slot: fewer than 65,536 variants, 524,280 trials per case. A dict entry and a key
    tuple per variant and case (the earlier layout) cost ~300 bytes per case of a two-variant run,
    this ~100 (bench/perf16_memory.md).

    A pair key ``(candidate, case)`` (a comparison's) takes a slot kept the same way: in an array
    per candidate, at the case's number. ``cases_of`` shares another index's case numbering (a
    run's comparisons number their cases as its attempts do): a comparison then costs 16 bytes
    where a slot of its own (a dict entry, an int and the key tuple) cost ~140 (issue 16). Any other
    key takes a slot of its own.
    """

    __slots__ = ("_case_names", "_cases", "_owner_block", "_owner_case", "_pairs", "_single_keys", "_singles",
                 "_starts", "_variant_names", "_variants")

    def __init__(self, cases_of: KeyIndex[Any] | None = None) -> None:
        # case id -> its number, and number -> case id: shared with ``cases_of`` when given
        self._cases: dict[str, int] = cases_of._cases if cases_of is not None else {}
        self._case_names: list[str] = cases_of._case_names if cases_of is not None else []
        self._starts: dict[str, list[array[int]]] = {}  # variant -> per block number: case number -> first slot
        self._pairs: dict[str, array[int]] = {}  # candidate -> case number -> the slot of (candidate, case)
        self._variants: dict[str | tuple[str], int] = {}  # variant -> its number; (candidate,) -> its pairs' number
        # number -> variant, or (candidate,) for a candidate's pairs: key() tells them apart by type
        self._variant_names: list[str | tuple[str]] = []
        self._owner_case = array("i")  # slot -> its case's number, or -1 - its single key's number
        self._owner_block = array("I")  # slot -> variant number << _VARIANT_BITS | block number (a pair: 0)
        self._singles: dict[K, int] = {}
        self._single_keys: list[K] = []

    @staticmethod
    def _pair_key(key: object) -> tuple[str, str] | None:
        if type(key) is tuple and len(key) == 2:
            candidate, case = key
            if type(candidate) is str and type(case) is str:
                return candidate, case
        return None

    def slot(self, key: K) -> int:
        given: Any = key  # a trial key read inline, as find reads it
        if type(given) is tuple and len(given) == 3:
            variant, case, trial = given
            if type(trial) is int and type(variant) is str and type(case) is str and trial >= 0:
                return self._trial_slot(variant, case, trial)
        start = self.find(key)
        if start is not None:
            return start
        pair_key = self._pair_key(key)
        if pair_key is not None:
            candidate, case = pair_key
            column = self._pairs.get(candidate)
            if column is None:
                column = self._pairs[candidate] = array("i")
            return self._new_slots(column, self._case_number(case), 1, self._owner((candidate,), 0))
        slot = self._singles[key] = len(self._owner_case)
        self._owner_case.append(-1 - len(self._single_keys))
        self._owner_block.append(0)
        self._single_keys.append(key)
        return slot

    def _trial_slot(self, variant: str, case: str, trial: int) -> int:
        """The slot of a trial key whose types :meth:`slot` checked, given one when it has none.
        Each attempt and its grading are stored through here: the look-up and the new slot
        share one reading of the key (no second check of its types, no second case look-up)."""
        high, first, size = _block_of(trial)
        columns = self._starts.get(variant)
        number = self._cases.get(case)
        if columns is not None and high < len(columns):
            column = columns[high]
            if number is not None and number < len(column) and (start := column[number]) >= 0:
                return start + trial - first
        else:
            column = self._column(variant, high)
        if number is None:
            number = self._case_number(case)
        return self._new_slots(column, number, size, self._owner(variant, high)) + trial - first

    def _new_slots(self, column: array[int], number: int, size: int, owner: int) -> int:
        """``size`` new slots, owned by ``owner`` and the case numbered ``number``, the first
        kept in ``column`` at the case's number."""
        start = len(self._owner_case)
        if start + size > _SLOTS:
            raise ValueError(f"a key index holds at most {_SLOTS} slots")
        if number == len(column):  # the usual case: cases are stored in the order first seen
            column.append(start)
        else:
            if number > len(column):
                column.extend([_ABSENT] * (number + 1 - len(column)))
            column[number] = start
        if size == 1:
            self._owner_case.append(number)
            self._owner_block.append(owner)
        else:
            self._owner_case.extend(array("i", [number]) * size)
            self._owner_block.extend(array("I", [owner]) * size)
        return start

    def _owner(self, variant: str | tuple[str], high: int) -> int:
        number = self._variants.get(variant)
        if number is None:  # a pair's candidate, first seen
            number = self._variants[variant] = len(self._variant_names)
            self._variant_names.append(variant)
        if number >= _MOST or high >= _MOST:
            raise ValueError(f"a run holds fewer than {_MOST} variants and {_MOST * _TRIALS_PER_BLOCK - 8} trials "
                             f"per case: {variant!r}, trial {_first_trial(high)}")
        return number << _VARIANT_BITS | high

    def _case_number(self, case: str) -> int:
        number = self._cases.get(case)
        if number is None:  # the string kept as given (a resolved case's id): see CaseTable.add
            number = self._cases[case] = len(self._case_names)
            self._case_names.append(case)
        return number

    def _column(self, variant: str, high: int) -> array[int]:
        """The first slots of ``variant``'s blocks numbered ``high``, by case number."""
        columns = self._starts.get(variant)
        if columns is None:
            variant = sys.intern(variant)
            columns = self._starts[variant] = []
            self._variants[variant] = len(self._variant_names)
            self._variant_names.append(variant)
        while len(columns) <= high:
            columns.append(array("i"))
        return columns[high]

    def find(self, key: object) -> int | None:
        """The slot of ``key``, None when it has none. Called several times per attempt (by each
        store and reader), so a trial key is read inline: two dict look-ups and two indexes,
        no tuple made."""
        if type(key) is tuple and len(key) == 3:
            variant, case, trial = key
            if type(trial) is int and type(variant) is str and type(case) is str and trial >= 0:
                columns = self._starts.get(variant)
                number = self._cases.get(case)
                if columns is None or number is None:
                    return None
                if trial == 0:
                    high = first = 0
                elif trial < _TRIALS_PER_BLOCK:
                    high = first = 1
                else:
                    high = trial // _TRIALS_PER_BLOCK + 1
                    first = (high - 1) * _TRIALS_PER_BLOCK
                if high >= len(columns) or number >= len(column := columns[high]) or column[number] < 0:
                    return None
                return column[number] + trial - first
        elif type(key) is tuple and len(key) == 2 and self._pairs:
            candidate, case = key
            if type(candidate) is str and type(case) is str:
                pairs = self._pairs.get(candidate)
                number = self._cases.get(case)
                if pairs is None or number is None or number >= len(pairs) or pairs[number] < 0:
                    return None
                return pairs[number]
        return self._singles.get(key)  # type: ignore[arg-type]

    def key(self, slot: int) -> K:
        number = self._owner_case[slot]
        if number < 0:
            return self._single_keys[-1 - number]
        owner = self._owner_block[slot]
        variant, high = self._variant_names[owner >> _VARIANT_BITS], owner & (_MOST - 1)
        if isinstance(variant, tuple):  # a pair's candidate
            return (variant[0], self._case_names[number])  # type: ignore[return-value]
        start = self._starts[variant][high][number]
        return (variant, self._case_names[number], _first_trial(high) + slot - start)  # type: ignore[return-value]

    def __len__(self) -> int:
        """Slots given out (blocks count whole)."""
        return len(self._owner_case)

    def slots_in_key_order(self) -> Iterator[int]:
        """Every slot given out, in the order of its key: trial blocks by (variant, case, block
        number), then the other keys sorted. No key object is made per slot, so writing a
        100,000-attempt run in key order does not build 100,000 keys to sort (the case ids are
        sorted once per variant: a list of the strings held)."""
        numbers = [self._cases[case] for case in sorted(self._cases)]
        for variant in sorted(self._starts):
            columns = self._starts[variant]
            for number in numbers:
                for high, column in enumerate(columns):
                    if number < len(column) and (start := column[number]) >= 0:
                        yield from range(start, start + _block_of(_first_trial(high))[2])
        if self._singles:  # pairs sorted among the other keys, as the keys they are
            yield from (self.slot(key) for key in sorted([*map(self.key, self._pair_slots(numbers)),  # type: ignore
                                                           *self._singles]))
        else:
            yield from self._pair_slots(numbers)

    def _pair_slots(self, numbers: list[int]) -> Iterator[int]:
        """The pairs' slots, in the order of their keys (``numbers``: the case numbers by id)."""
        for candidate in sorted(self._pairs):
            column = self._pairs[candidate]
            for number in numbers:
                if number < len(column) and (slot := column[number]) >= 0:
                    yield slot


class KeyList(Sequence[K]):
    """A list of keys of one :class:`KeyIndex`, held as their slots (4 bytes each) and made
    into keys when read: a plan of 100,000 trials is not 100,000 key tuples."""

    __slots__ = ("_index", "_slots")

    def __init__(self, index: KeyIndex[K]) -> None:
        self._index = index
        self._slots = array("i")

    def append(self, key: K) -> None:
        self._slots.append(self._index.slot(key))

    def append_slot(self, slot: int) -> None:
        self._slots.append(slot)

    def __len__(self) -> int:
        return len(self._slots)

    @overload
    def __getitem__(self, i: int) -> K: ...
    @overload
    def __getitem__(self, i: slice) -> list[K]: ...
    def __getitem__(self, i: int | slice) -> K | list[K]:
        if isinstance(i, slice):
            return [self._index.key(s) for s in self._slots[i]]
        return self._index.key(self._slots[i])

    def __iter__(self) -> Iterator[K]:
        key = self._index.key
        for slot in self._slots:
            yield key(slot)


class _Summaries:
    """Each slot's ``summarize`` value: two bytes a slot (an index into the distinct values, which
    repeat: an attempt's ending) while there are at most :data:`_SHARED_SUMMARIES` distinct
    hashable ones, a list of them after. Equal values share one object, as before; a list of
    them per slot held ~34 bytes a case at 100,000 cases (issue 16, bench/perf16_memory.md)."""

    __slots__ = ("_code_of", "_codes", "_distinct", "_list")

    def __init__(self) -> None:
        self._codes: array[int] | None = array("H")
        self._distinct: list[Any] = [None]  # code 0: no summary
        self._code_of: dict[Any, int] = {}
        self._list: list[Any] = []  # once the codes would not do

    def __len__(self) -> int:
        return len(self._codes) if self._codes is not None else len(self._list)

    def __getitem__(self, slot: int) -> Any:
        codes = self._codes
        return self._distinct[codes[slot]] if codes is not None else self._list[slot]

    def keep(self, slot: int, summary: Any) -> None:
        """Keep ``summary`` at ``slot``, growing to it (the slots between have none). Called by
        name from :meth:`RecordStore.put` (once a record): ``x[i] = v`` on a Python class goes
        through a slot wrapper that costs more than the call."""
        codes = self._codes
        if codes is not None:
            try:
                code = self._code_of.get(summary)
            except TypeError:  # not hashable: kept as is, in the list
                code = None
            else:
                if code is None:
                    code = self._code(summary)
            if code is not None:
                if slot == len(codes):
                    codes.append(code)
                    return
                if slot > len(codes):
                    codes.frombytes(bytes(codes.itemsize * (slot + 1 - len(codes))))
                codes[slot] = code
                return
            self._list, self._codes = [self._distinct[c] for c in codes], None
        code = self._code(summary)
        held = self._list
        if slot >= len(held):
            held.extend([None] * (slot + 1 - len(held)))
        held[slot] = self._distinct[code] if code is not None else summary

    __setitem__ = keep

    def _code(self, summary: Any) -> int | None:
        """The index of the value equal to ``summary``, made when there is room; None when it
        is not hashable or there is no room."""
        try:
            code = self._code_of.get(summary)
        except TypeError:  # not hashable: kept as is
            return None
        if summary is None:
            return 0
        if code is None and len(self._distinct) <= _SHARED_SUMMARIES:
            code = self._code_of[summary] = len(self._distinct)
            self._distinct.append(summary)
        return code


class RecordStore(MutableMapping[K, V]):
    """``key -> record`` with the records spilled, as JSON, to a temporary file."""

    __slots__ = ("_ahead", "_ahead_at", "_codec", "_file", "_flushed", "_keys", "_len", "_next", "_packed",
                 "_pending", "_size", "_summaries", "_summarize")

    def __init__(self, items: Any = None, *, summarize: Callable[[V], Any] | None = None,
                 keys: KeyIndex[K] | None = None, codec: Codec[V] | None = None) -> None:
        """``summarize`` keeps a small value per record in memory (an attempt's ending), so
        readers that need only that never decode the record again."""
        self._codec: Codec[V] = codec if codec is not None else JsonCodec()  # type: ignore[assignment]
        self._keys: KeyIndex[K] = keys if keys is not None else KeyIndex()
        self._packed = array("q")  # slot -> offset << 32 | length, or _ABSENT
        self._len = 0
        self._summarize = summarize
        self._summaries = _Summaries()
        self._file: IO[bytes] | None = None
        self._size = 0  # bytes written or pending
        self._flushed = 0  # bytes already in the file
        # A copy of each record's bytes, not the bytes objects: orjson's output keeps a buffer
        # of several KB whatever its length, so a list of them would cost ten times the data.
        self._pending = bytearray()
        # Read ahead (see _bytes): the last block read, where it starts, and where the last
        # record read without it ended.
        self._ahead = b""
        self._ahead_at = 0
        self._next = -1
        if items:
            self.update(items)

    @property
    def key_index(self) -> KeyIndex[K]:
        """The key index, for another store of the same keys to share."""
        return self._keys

    # -- storage -------------------------------------------------------------------------------

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="mst-records-")  # noqa: SIM115 - lives with the store
        fd = self._file.fileno()
        offset = self._flushed
        with memoryview(self._pending) as pending:
            view = pending
            while view:
                n = os.pwrite(fd, view, offset)
                offset += n
                view = view[n:]
            del view
        self._pending.clear()
        self._flushed = offset

    def _bytes(self, packed: int) -> bytes:
        """A record's bytes. Readers mostly go through the records in the order they were
        stored (results.json and run.json in key order, the summary and the report case by
        case: one variant's records are every other one of a two-variant run), so a read a
        little onwards from the last takes :data:`_READ_AHEAD` bytes at once and the records
        after it come from memory, not one ``pread`` each; a read elsewhere takes its record
        alone. The file is only ever appended to: a block read stays true."""
        offset, length = packed >> _LEN_BITS, packed & ((1 << _LEN_BITS) - 1)
        start = offset - self._ahead_at
        ahead = self._ahead
        if start >= 0 and start + length <= len(ahead):
            return ahead[start:start + length]
        if offset + length > self._flushed:
            self._flush()
        assert self._file is not None
        if offset == self._next or 0 <= start <= len(ahead) + _READ_AHEAD:  # onwards from the last read
            ahead = self._ahead = os.pread(self._file.fileno(), max(length, _READ_AHEAD), offset)
            self._ahead_at = offset
            return ahead[:length]
        self._next = offset + length
        return os.pread(self._file.fileno(), length, offset)

    def _read(self, packed: int) -> V:
        return self._codec.from_json(orjson.loads(self._bytes(packed)))

    def slots_in_key_order(self) -> Iterator[int]:
        """The slots of the records held, in the order of their keys (see :class:`KeyIndex`)."""
        packed = self._packed
        for slot in self._keys.slots_in_key_order():
            if slot < len(packed) and packed[slot] != _ABSENT:
                yield slot

    def raw_in_key_order(self) -> Iterator[bytes]:
        """Every record's stored bytes, in the order of their keys (run.json, results.json)."""
        packed = self._packed
        for slot in self.slots_in_key_order():
            yield self._bytes(packed[slot])

    def raw(self, key: K) -> bytes:
        """The record's JSON as stored, not decoded: for writing it out again as it is."""
        return self._bytes(self._packed[self._held_slot(key)])

    def slot_of(self, key: object) -> int | None:
        """The slot ``key`` has in the key index (None: none), for :meth:`at` and
        :meth:`summary_at` here and in the stores that share the index: one look-up, not one per
        store and read."""
        return self._keys.find(key)

    def holds(self, slot: int | None) -> bool:
        """Whether a record is held at ``slot`` (see :meth:`slot_of`)."""
        return slot is not None and slot < len(self._packed) and self._packed[slot] != _ABSENT

    def holds_all(self, keys: Iterable[object]) -> bool:
        """Whether a record is held for every one of ``keys`` (a run's check that every attempt
        was collected): one look-up a key, where ``key in store`` is three calls (the ``in``
        slot wrapper, ``__contains__`` and ``_packed_at``) before the look-up."""
        find, packed = self._keys.find, self._packed
        for key in keys:
            slot = find(key)
            if slot is None or slot >= len(packed) or packed[slot] == _ABSENT:
                return False
        return True

    def at(self, slot: int | None) -> V | None:
        """The record at ``slot`` (see :meth:`slot_of`), None when none is held there."""
        packed = self._packed
        if slot is None or slot >= len(packed) or packed[slot] == _ABSENT:
            return None
        return self._read(packed[slot])

    def json_at(self, slot: int | None) -> dict[str, Any] | None:
        """The record at ``slot`` as its stored JSON object (a fresh one), not made into the
        codec's record; None when none is held there. For a reader of a few fields of every
        record (the summary): building a typed record per read only to drop it costs more than
        the read. The record was checked by the codec when it was stored."""
        packed = self._packed
        if slot is None or slot >= len(packed) or packed[slot] == _ABSENT:
            return None
        data: dict[str, Any] = orjson.loads(self._bytes(packed[slot]))
        return data

    def raw_at(self, slot: int | None) -> bytes:
        """The stored bytes of the record at ``slot`` (see :meth:`slot_of`), as :meth:`raw` gives
        them, without looking the key up again; KeyError when none is held there."""
        packed = self._packed
        if slot is None or slot >= len(packed) or packed[slot] == _ABSENT:
            raise KeyError(slot)
        return self._bytes(packed[slot])

    def summaries(self) -> Iterator[Any]:
        """The ``summarize`` value of every record held, in slot order: for a count over all
        records (the trials among the attempts) without a key made and looked up per record."""
        if self._summarize is None:
            raise TypeError("this RecordStore keeps no summaries")
        summaries = self._summaries
        for slot, packed in enumerate(self._packed):
            if packed != _ABSENT:
                yield summaries[slot]

    def summary_at(self, slot: int | None) -> Any:
        """The ``summarize`` value of the record at ``slot``; KeyError when none is held there."""
        if self._summarize is None:
            raise TypeError("this RecordStore keeps no summaries")
        packed = self._packed
        if slot is None or slot >= len(packed) or packed[slot] == _ABSENT:
            raise KeyError(slot)
        return self._summaries[slot]

    def _held_slot(self, key: object) -> int:
        """The slot of the record held for ``key``; KeyError when there is none."""
        slot = self._keys.find(key)
        if slot is None or slot >= len(self._packed) or self._packed[slot] == _ABSENT:
            raise KeyError(key)
        return slot

    def _packed_at(self, key: object) -> int:
        slot = self._keys.find(key)
        if slot is None or slot >= len(self._packed):
            return _ABSENT
        return self._packed[slot]

    # -- writing -------------------------------------------------------------------------------

    def put(self, key: K, value: V, data: bytes) -> None:
        """Store ``value`` whose JSON encoding the caller already has (it journaled the same
        bytes): the record is encoded once, not once per place it goes."""
        slot = self._keys.slot(key)
        packed = self._packed
        size = self._size
        length = len(data)
        if slot == len(packed):  # the usual case: a record at a new slot, the next one
            packed.append(size << _LEN_BITS | length)
            self._len += 1
        else:
            if slot > len(packed):
                packed.extend([_ABSENT] * (slot + 1 - len(packed)))
            if packed[slot] == _ABSENT:
                self._len += 1
            packed[slot] = size << _LEN_BITS | length
        self._pending += data
        size = self._size = size + length
        # Buffered, then one write to the spill file. The block is read here, not bound at
        # import: a test that makes blocks small (to see a big run's memory in a small one)
        # must make this buffer small too, as it is, next to its records, in a big run. A
        # quarter block: grading fills three stores at once, and three whole blocks were ~3 MiB
        # of the run's peak (issue 16); a write of a quarter block costs as little per byte.
        if size - self._flushed >= fileio.IO_BLOCK >> 2:
            self._flush()
        if self._summarize is not None:
            self._summaries.keep(slot, self._summarize(value))  # equal summaries share one object

    # -- mapping -------------------------------------------------------------------------------

    def __setitem__(self, key: K, value: V) -> None:
        """Store ``value``; a plain JSON object is taken as the record's stored form (one an
        older mst wrote, say) and decoded through the codec, so it is checked like any read."""
        if type(value) is dict and not isinstance(self._codec, JsonCodec):
            self.put(key, self._codec.from_json(value), orjson.dumps(value))  # type: ignore[arg-type]
            return
        self.put(key, value, orjson.dumps(self._codec.to_json(value)))

    def summary(self, key: K) -> Any:
        """The ``summarize`` value of the record at ``key`` (KeyError when absent)."""
        if self._summarize is None:
            raise TypeError("this RecordStore keeps no summaries")
        return self._summaries[self._held_slot(key)]

    def __getitem__(self, key: K) -> V:
        return self._read(self._packed[self._held_slot(key)])

    def get(self, key: K, default: Any = None) -> Any:  # type: ignore[override]
        packed = self._packed_at(key)
        return default if packed == _ABSENT else self._read(packed)

    def __delitem__(self, key: K) -> None:
        slot = self._held_slot(key)
        self._packed[slot] = _ABSENT
        self._len -= 1
        if slot < len(self._summaries):
            self._summaries[slot] = None

    def __contains__(self, key: object) -> bool:
        return self._packed_at(key) != _ABSENT

    def __iter__(self) -> Iterator[K]:
        key = self._keys.key
        for slot, packed in enumerate(self._packed):
            if packed != _ABSENT:
                yield key(slot)

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return f"RecordStore({len(self)} records)"

    def close(self) -> None:
        self._pending.clear()
        self._ahead = b""
        if self._file is not None:
            self._file.close()
            self._file = None

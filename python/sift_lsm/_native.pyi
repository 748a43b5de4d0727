"""Type stubs of the compiled module ``sift_lsm._native`` (re-exported by ``sift_lsm``).

Kept in step with ``python/src/*.rs`` by ``tests/test_stubs.py``.
"""

import os
from datetime import datetime
from types import TracebackType
from typing import Any, Callable, Dict, Iterable, Iterator, List, Literal, Optional, Sequence, Tuple, Type, Union, overload

__version__: str

Document = Dict[str, Any]
"""A JSON object: str keys; dict, list, tuple, str, int (64-bit), float (finite), bool, None values."""
Key = Union[str, int]
"""A primary key: the key field's str, or its int for integer keys."""
Value = Union[int, float, str, datetime]
"""A query value: int, float or str as the index's type; time indexes also take epoch
milliseconds, RFC 3339 text and timezone-aware datetimes."""
Meta = Dict[str, Any]
"""``{"pk": str, "seq": int}``: the primary key's text and the live version's sequence number."""
IndexType = Literal["int", "float", "string", "time", "geo"]
IndexKind = Literal["composite", "eager", "lazy", "memory", "embedded", "sst-local", "next"]
MaintenanceName = Literal["sync-full", "sync-insert", "deferred", "async-simple", "async-session"]
IndexInfo = Dict[str, Any]
"""``{"name", "path", "type", "kind", "maintenance", "unique", "state"}``."""

def open(
    path: Union[str, "os.PathLike[str]"],
    *,
    memtable_bytes: Optional[int] = None,
    block_cache_bytes: Optional[int] = None,
    sync_writes: bool = False,
) -> Database:
    """Opens (creating if missing) the database in directory ``path``."""

class Database:
    """An open Sift database; a context manager that closes it on exit."""

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
    @property
    def path(self) -> str:
        """The directory given to ``open``."""
    def collection(self, name: str, primary_key: Optional[str] = None) -> Collection:
        """The collection ``name``, created (keyed by ``primary_key``) if missing."""
    def collections(self) -> List[str]:
        """The names of the collections, sorted."""
    def session(self) -> Session:
        """A session whose collections read their own writes on ``async-session`` indexes."""
    def wait_until_indexed(self, timeout: Optional[float] = None) -> bool:
        """Waits until asynchronous indexes applied every write so far; False on timeout."""
    def flush(self) -> None:
        """Writes the memtables to files."""
    def compact(self) -> None:
        """Compacts every tree fully."""
    def stats(self) -> Dict[str, Any]:
        """Engine and index statistics."""
    def close(self) -> None:
        """Closes the database, waiting for calls in progress; later calls raise DatabaseClosed."""
    def __enter__(self) -> Database: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

class Session:
    """A read-your-writes session; a context manager that ends it on exit."""

    @property
    def consistency(self) -> Literal["read-your-writes", "eventual"]:
        """What the session's queries guarantee now."""
    def collection(self, name: str) -> Collection:
        """The existing collection ``name``, reading and writing through this session."""
    def end(self) -> None:
        """Ends the session; later calls through it raise SessionExpired."""
    def __enter__(self) -> Session: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

class Collection:
    """Documents keyed by one field, with secondary indexes."""

    @property
    def name(self) -> str:
        """The collection's name."""
    @property
    def primary_key(self) -> str:
        """The path of the primary-key field."""
    def put(self, document: Document) -> None:
        """Stores ``document``, replacing the one with the same key."""
    def put_many(self, documents: Iterable[Document], *, chunk_size: int = 1000) -> int:
        """Stores every document, ``chunk_size`` per atomic batch; returns how many."""
    def get(self, key: Key) -> Optional[Document]:
        """The document with primary key ``key``, or None."""
    def delete(self, key: Key) -> bool:
        """Deletes the document with primary key ``key``; whether there was one."""
    def __contains__(self, key: Key) -> bool: ...
    def create_index(
        self,
        name: str,
        *,
        path: str,
        type: IndexType,
        kind: IndexKind = "composite",
        maintenance: Optional[MaintenanceName] = None,
        unique: bool = False,
    ) -> IndexInfo:
        """Creates and fills the index ``name`` over the attribute at ``path``."""
    def drop_index(self, name: str) -> None:
        """Drops the index ``name``."""
    def indexes(self) -> List[IndexInfo]:
        """The collection's indexes."""
    @overload
    def lookup(self, index: str, value: Value, limit: Optional[int] = None, *, with_meta: Literal[False] = False) -> List[Document]: ...
    @overload
    def lookup(self, index: str, value: Value, limit: Optional[int] = None, *, with_meta: Literal[True]) -> List[Tuple[Document, Meta]]: ...
    @overload
    def range(self, index: str, lo: Optional[Value], hi: Optional[Value], limit: Optional[int] = None, *, with_meta: Literal[False] = False) -> List[Document]: ...
    @overload
    def range(self, index: str, lo: Optional[Value], hi: Optional[Value], limit: Optional[int] = None, *, with_meta: Literal[True]) -> List[Tuple[Document, Meta]]: ...
    def range_iter(
        self, index: str, lo: Optional[Value], hi: Optional[Value], limit: Optional[int] = None, *, with_meta: bool = False
    ) -> HitIterator:
        """``range`` as an iterator making each document on demand."""
    @overload
    def within(self, index: str, bbox: Sequence[float], limit: Optional[int] = None, *, with_meta: Literal[False] = False) -> List[Document]: ...
    @overload
    def within(self, index: str, bbox: Sequence[float], limit: Optional[int] = None, *, with_meta: Literal[True]) -> List[Tuple[Document, Meta]]: ...
    def scan(self, start: Optional[Key] = None) -> ScanIterator:
        """Every document in primary-key order, a page at a time."""
    def import_jsonl(
        self,
        path: Union[str, "os.PathLike[str]"],
        *,
        progress: Union[bool, None, Callable[[int, int, int], Any]] = None,
        chunk_size: int = 1000,
    ) -> int:
        """Loads a JSON-lines file in atomic batches; returns how many documents."""

class HitIterator(Iterator[Any]):
    """The hits of ``range_iter``."""

    def __iter__(self) -> HitIterator: ...
    def __next__(self) -> Any: ...
    def __length_hint__(self) -> int: ...

class ScanIterator(Iterator[Document]):
    """The documents of ``scan``."""

    def __iter__(self) -> ScanIterator: ...
    def __next__(self) -> Document: ...

class Error(Exception):
    """Base class of every error Sift raises."""

class InvalidDocument(Error):
    """A document cannot be stored; nothing was written."""

class UniqueViolation(Error):
    """A unique index holds the value for another document; nothing was written."""

class CollectionNotFound(Error):
    """No collection of that name."""

class IndexNotFound(Error):
    """The collection has no index of that name."""

class AlreadyExists(Error):
    """A collection or index of that name exists already."""

class InvalidArgument(Error):
    """A bad argument: an index definition, a query value or bounds, a box, a limit."""

class Corruption(Error):
    """Stored data failed a check."""

class DatabaseClosed(Error):
    """The database was closed."""

class DatabaseLocked(Error):
    """Another process or handle has the database open."""

class StorageError(Error):
    """An I/O error of the storage engine."""

class SessionExpired(Error):
    """The session was ended or sat idle past its timeout."""

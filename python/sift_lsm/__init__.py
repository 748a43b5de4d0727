"""Sift from Python: collections of JSON documents with secondary indexes.

>>> import sift_lsm
>>> with sift_lsm.open("tweets.db") as db:
...     tweets = db.collection("tweets", primary_key="id")
...     tweets.create_index("by_user", path="user.id", type="int", kind="composite")
...     tweets.put({"id": "t1", "user": {"id": 42}, "text": "hello"})
...     tweets.lookup("by_user", 42, limit=10)   # newest first

Every engine call releases the GIL; objects may be shared between threads. Errors are
``sift_lsm.Error`` and its subclasses, carrying the engine's message.
"""

from ._native import (
    AlreadyExists,
    Collection,
    CollectionNotFound,
    Corruption,
    Database,
    DatabaseClosed,
    DatabaseLocked,
    Error,
    HitIterator,
    IndexNotFound,
    InvalidArgument,
    InvalidDocument,
    ScanIterator,
    Session,
    SessionExpired,
    StorageError,
    UniqueViolation,
    __version__,
    open,
)
from .study import load_results, results_frame

__all__ = [
    "AlreadyExists",
    "Collection",
    "CollectionNotFound",
    "Corruption",
    "Database",
    "DatabaseClosed",
    "DatabaseLocked",
    "Error",
    "HitIterator",
    "IndexNotFound",
    "InvalidArgument",
    "InvalidDocument",
    "ScanIterator",
    "Session",
    "SessionExpired",
    "StorageError",
    "UniqueViolation",
    "__version__",
    "load_results",
    "open",
    "results_frame",
]

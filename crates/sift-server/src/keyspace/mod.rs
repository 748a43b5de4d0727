//! The keyspace: every Redis key as one document of the collection `redis.keys` in a Sift
//! [`Database`], with the key locks, SCAN cursors and key count the commands need.

mod cursors;
pub mod glob;
mod locks;
pub mod record;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use sift_index::{
    Database, DatabaseOptions, IndexError, WriteOp, MAX_DOCUMENT_BYTES, MAX_PRIMARY_KEY_BYTES,
};

pub use cursors::Cursors;
pub use locks::KeyLocks;
pub use record::{Value, ValueType, KEYS_COLLECTION, KEY_FIELD};

/// Keys deleted per engine batch by FLUSHDB.
const FLUSH_BATCH_KEYS: usize = 1000;

/// Why a keyspace operation failed. Each becomes an error reply naming the problem.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyspaceError {
    /// The key is not something Sift can store as a primary key.
    #[error("{reason}")]
    UnstorableKey {
        /// Why.
        reason: String,
    },
    /// The key holds a value of another type.
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    /// The stored document of a key is not a server record.
    #[error("the value stored at key '{key}' is damaged: {reason}")]
    Damaged {
        /// The key, lossily as text.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The value does not fit in one document.
    #[error("value too large: Sift stores at most {limit_bytes} bytes per key (this one needs {length_bytes})")]
    TooLarge {
        /// The stored document's size.
        length_bytes: usize,
        /// `MAX_DOCUMENT_BYTES`.
        limit_bytes: usize,
    },
    /// The database refused or failed (I/O, a stopped engine, an index constraint).
    #[error(transparent)]
    Database(#[from] IndexError),
}

/// A page of SCAN: (key, type) pairs, and where the next page starts when more may follow.
pub type ScanPage = (Vec<(Bytes, ValueType)>, Option<Vec<u8>>);

/// What an update does with the key after looking at its current value.
#[derive(Debug)]
pub enum Update {
    /// Leave it as it is.
    Keep,
    /// Store this value.
    Put(Value),
    /// Delete the key.
    Delete,
}

/// The keys of one database.
pub struct Keyspace {
    database: Database,
    locks: KeyLocks,
    cursors: Cursors,
    /// Live keys. Exact: every write that can create or remove a key reads it first, under
    /// its lock.
    key_count: AtomicU64,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("key_count", &self.key_count)
            .finish_non_exhaustive()
    }
}

impl Keyspace {
    /// Opens (or creates) the database at `dir` and counts its keys.
    pub fn open(
        dir: &std::path::Path,
        options: DatabaseOptions,
    ) -> Result<Keyspace, KeyspaceError> {
        let started = Instant::now();
        let database = Database::open(dir, options)?;
        if database.collection(KEYS_COLLECTION).is_err() {
            database.create_collection(KEYS_COLLECTION, KEY_FIELD)?;
        }
        let keyspace = Keyspace {
            database,
            locks: KeyLocks::new(),
            cursors: Cursors::default(),
            key_count: AtomicU64::new(0),
        };
        let mut count = 0u64;
        let mut from = Vec::new();
        loop {
            let page = keyspace.database.scan(KEYS_COLLECTION, &from, 10_000)?;
            let Some(last) = page.last() else { break };
            from = after(&last.pk);
            count += page.len() as u64;
        }
        keyspace.key_count.store(count, Ordering::Relaxed);
        tracing::info!(
            keys = count,
            open_ms = started.elapsed().as_millis() as u64,
            "keyspace opened"
        );
        Ok(keyspace)
    }

    /// The database underneath (for INFO, the search layer and a clean close).
    pub fn database(&self) -> &Database {
        &self.database
    }

    /// Gives the database back for a clean close.
    pub fn into_database(self) -> Database {
        self.database
    }

    /// Live keys.
    pub fn len(&self) -> u64 {
        self.key_count.load(Ordering::Relaxed)
    }

    /// The SCAN cursor table.
    pub fn cursors(&self) -> &Cursors {
        &self.cursors
    }

    /// The value of `key`, if any. A key Sift cannot store has no value.
    pub fn get(&self, key: &[u8]) -> Result<Option<Value>, KeyspaceError> {
        let Ok(key) = storable_key(key) else {
            return Ok(None);
        };
        self.read(key)
    }

    /// Whether `key` exists, without decoding its value (EXISTS).
    pub fn contains(&self, key: &[u8]) -> Result<bool, KeyspaceError> {
        let Ok(key) = storable_key(key) else {
            return Ok(false);
        };
        Ok(self
            .database
            .get(KEYS_COLLECTION, key.as_bytes())?
            .is_some())
    }

    fn read(&self, key: &str) -> Result<Option<Value>, KeyspaceError> {
        let Some(hit) = self.database.get(KEYS_COLLECTION, key.as_bytes())? else {
            return Ok(None);
        };
        record::decode(&hit.doc)
            .map(Some)
            .map_err(|error| KeyspaceError::Damaged {
                key: key.to_owned(),
                reason: error.reason,
            })
    }

    /// Reads `key`, lets `decide` choose what to do with it, and does it, holding the key's
    /// lock throughout; returns what `decide` returned with its choice.
    pub fn update<R>(
        &self,
        key: &[u8],
        decide: impl FnOnce(Option<Value>) -> Result<(Update, R), KeyspaceError>,
    ) -> Result<R, KeyspaceError> {
        let text = storable_key(key)?;
        let _guard = self.locks.lock(&[key]);
        let current = self.read(text)?;
        let existed = current.is_some();
        let (update, result) = decide(current)?;
        match update {
            Update::Keep => {}
            Update::Put(value) => {
                let document = record::encode(text, &value);
                if document.len() > MAX_DOCUMENT_BYTES {
                    return Err(KeyspaceError::TooLarge {
                        length_bytes: document.len(),
                        limit_bytes: MAX_DOCUMENT_BYTES,
                    });
                }
                self.database.put(KEYS_COLLECTION, &document)?;
                if !existed {
                    self.key_count.fetch_add(1, Ordering::Relaxed);
                }
            }
            Update::Delete => {
                if existed {
                    self.database.delete(KEYS_COLLECTION, text.as_bytes())?;
                    self.key_count.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        Ok(result)
    }

    /// Stores each (key, value) whatever was there, in order, as ONE engine batch (a pipeline
    /// of SETs): the outer error is the batch's (nothing was stored); the inner ones are the
    /// entries refused before it (unstorable key, too large), which are left out of it.
    pub fn put_many(
        &self,
        entries: &[(&[u8], Value)],
    ) -> Result<Vec<Result<(), KeyspaceError>>, KeyspaceError> {
        let mut outcomes: Vec<Result<(), KeyspaceError>> = Vec::with_capacity(entries.len());
        let mut documents: Vec<(&str, Vec<u8>)> = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            let checked = storable_key(key).and_then(|text| {
                let document = record::encode(text, value);
                if document.len() > MAX_DOCUMENT_BYTES {
                    return Err(KeyspaceError::TooLarge {
                        length_bytes: document.len(),
                        limit_bytes: MAX_DOCUMENT_BYTES,
                    });
                }
                Ok((text, document))
            });
            match checked {
                Ok(document) => {
                    documents.push(document);
                    outcomes.push(Ok(()));
                }
                Err(error) => outcomes.push(Err(error)),
            }
        }
        if documents.is_empty() {
            return Ok(outcomes);
        }
        let keys: Vec<&str> = documents.iter().map(|(key, _)| *key).collect();
        let _guard = self.locks.lock(&keys);
        // New keys, for the count: absent now and not already written earlier in the batch.
        let mut created: Vec<&str> = Vec::new();
        for key in &keys {
            if !created.contains(key)
                && self
                    .database
                    .get(KEYS_COLLECTION, key.as_bytes())?
                    .is_none()
            {
                created.push(key);
            }
        }
        let ops: Vec<WriteOp<'_>> = documents
            .iter()
            .map(|(_, document)| WriteOp::Put(document))
            .collect();
        self.database.write(KEYS_COLLECTION, &ops)?;
        self.key_count
            .fetch_add(created.len() as u64, Ordering::Relaxed);
        Ok(outcomes)
    }

    /// Deletes the keys that exist, in one batch; returns how many there were.
    pub fn delete_many(&self, keys: &[Bytes]) -> Result<i64, KeyspaceError> {
        let storable: Vec<&str> = keys
            .iter()
            .filter_map(|key| storable_key(key).ok())
            .collect();
        let _guard = self.locks.lock(&storable);
        let mut existing: Vec<&str> = Vec::new();
        for key in storable {
            if !existing.contains(&key)
                && self
                    .database
                    .get(KEYS_COLLECTION, key.as_bytes())?
                    .is_some()
            {
                existing.push(key);
            }
        }
        if existing.is_empty() {
            return Ok(0);
        }
        let ops: Vec<WriteOp<'_>> = existing
            .iter()
            .map(|key| WriteOp::Delete(key.as_bytes()))
            .collect();
        self.database.write(KEYS_COLLECTION, &ops)?;
        self.key_count
            .fetch_sub(existing.len() as u64, Ordering::Relaxed);
        Ok(existing.len() as i64)
    }

    /// A page of keys in key order from `from` (inclusive): (key, type) pairs and, when more
    /// may follow, where the next page starts.
    pub fn scan(&self, from: &[u8], count: usize) -> Result<ScanPage, KeyspaceError> {
        let page = self.database.scan(KEYS_COLLECTION, from, count.max(1))?;
        let next = (page.len() == count.max(1))
            .then(|| page.last().map(|hit| after(&hit.pk)))
            .flatten();
        let mut keys = Vec::with_capacity(page.len());
        for hit in page {
            let value = record::decode(&hit.doc).map_err(|error| KeyspaceError::Damaged {
                key: String::from_utf8_lossy(&hit.pk).into_owned(),
                reason: error.reason,
            })?;
            keys.push((Bytes::from(hit.pk), value.value_type()));
        }
        Ok((keys, next))
    }

    /// Deletes every key (FLUSHDB), holding every key lock: other writes wait.
    pub fn flush_all(&self) -> Result<u64, KeyspaceError> {
        let _guard = self.locks.lock_all();
        let mut deleted = 0u64;
        loop {
            let page = self.database.scan(KEYS_COLLECTION, b"", FLUSH_BATCH_KEYS)?;
            if page.is_empty() {
                break;
            }
            let ops: Vec<WriteOp<'_>> = page.iter().map(|hit| WriteOp::Delete(&hit.pk)).collect();
            self.database.write(KEYS_COLLECTION, &ops)?;
            deleted += page.len() as u64;
        }
        self.key_count.store(0, Ordering::Relaxed);
        Ok(deleted)
    }
}

/// The smallest key after `key`.
fn after(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

/// `key` as the primary key Sift stores: UTF-8, not empty, at most `MAX_PRIMARY_KEY_BYTES`.
pub fn storable_key(key: &[u8]) -> Result<&str, KeyspaceError> {
    let unstorable = |reason: String| KeyspaceError::UnstorableKey { reason };
    if key.is_empty() {
        return Err(unstorable("Sift does not store the empty key".to_owned()));
    }
    if key.len() > MAX_PRIMARY_KEY_BYTES {
        return Err(unstorable(format!(
            "key of {} bytes is longer than Sift's limit of {MAX_PRIMARY_KEY_BYTES} bytes",
            key.len()
        )));
    }
    std::str::from_utf8(key).map_err(|_| unstorable("Sift keys must be UTF-8 text".to_owned()))
}

//! SQLite (Debian's libsqlite3 through `rusqlite`) behind the index benchmark's `IndexEngine`:
//! documents as JSON text in `docs(rowid INTEGER PRIMARY KEY, tweet_id INTEGER UNIQUE, doc
//! TEXT)`, one expression index per attribute on `json_extract(doc, '$.path')`. A PUT is
//! `INSERT OR REPLACE` in its own transaction: a replaced document gets a new, highest rowid,
//! so "newest first" is `ORDER BY rowid DESC`, and every index is maintained in the same
//! transaction (exact answers). Journal mode WAL with `synchronous=NORMAL` (commits are not
//! fsynced, like the other engines' unsynced WAL), page cache of `--cache-bytes`.
//!
//! `created_at` is indexed and compared as its RFC 3339 text: the generator writes one fixed
//! format (`YYYY-MM-DDTHH:MM:SSZ`, UTC), whose text order is time order.

use rusqlite::{ffi, params, Connection};
use sift_bench::index::{BenchError, EngineCounters, IndexBenchConfig, IndexEngine, TreeBytes};
use sift_workload::{format_rfc3339_seconds, Attribute};
use std::path::{Path, PathBuf};

const DATABASE_FILE: &str = "docs.sqlite";

pub struct SqliteIndexEngine {
    connection: Connection,
    indexed: Vec<Attribute>,
    path: PathBuf,
    cache_kib: usize,
}

fn sqlite_error(context: &str, error: rusqlite::Error) -> BenchError {
    BenchError::new(format!("sqlite: {context}: {error}"))
}

/// The indexed expression of an attribute (queries must repeat it exactly to use the index).
fn expression(attribute: Attribute) -> String {
    format!("json_extract(doc, '$.{}')", attribute.path())
}

fn index_name(attribute: Attribute) -> String {
    format!("index_{}", attribute.path().replace('.', "_"))
}

/// A query value as SQLite compares it: the integer, or the RFC 3339 text of a time.
fn sql_value(attribute: Attribute, value: i64) -> rusqlite::types::Value {
    match attribute {
        Attribute::UserId => rusqlite::types::Value::Integer(value),
        Attribute::CreationTime => rusqlite::types::Value::Text(format_rfc3339_seconds(value)),
    }
}

/// `LIMIT` of a top-K (-1: no limit).
fn limit(top_k: Option<usize>) -> i64 {
    top_k.map_or(-1, |k| i64::try_from(k).unwrap_or(i64::MAX))
}

impl SqliteIndexEngine {
    pub fn open(config: &IndexBenchConfig, dir: &Path) -> Result<Box<dyn IndexEngine>, BenchError> {
        Ok(Box::new(Self::create(config, dir)?))
    }

    pub fn create(config: &IndexBenchConfig, dir: &Path) -> Result<SqliteIndexEngine, BenchError> {
        let path = dir.join(DATABASE_FILE);
        let connection = Connection::open(&path)
            .map_err(|e| sqlite_error(&format!("cannot open {}", path.display()), e))?;
        let journal_mode: String = connection
            .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
            .map_err(|e| sqlite_error("cannot set WAL mode", e))?;
        if !journal_mode.eq_ignore_ascii_case("wal") {
            return Err(BenchError::new(format!(
                "sqlite: journal mode is {journal_mode}, not WAL"
            )));
        }
        let cache_kib = (config.cache_bytes / 1024).max(1);
        connection
            .execute_batch(&format!(
                "PRAGMA synchronous=NORMAL; PRAGMA cache_size=-{cache_kib};
                 CREATE TABLE IF NOT EXISTS docs(
                     rowid INTEGER PRIMARY KEY, tweet_id INTEGER UNIQUE NOT NULL,
                     doc TEXT NOT NULL);"
            ))
            .map_err(|e| sqlite_error("cannot create the table", e))?;
        let mut indexed = Vec::new();
        for spec in &config.indexes {
            // An index on the expression alone: SQLite appends the rowid to every index
            // entry, so entries of one value are already in rowid (insertion) order.
            connection
                .execute_batch(&format!(
                    "CREATE INDEX IF NOT EXISTS {} ON docs({});",
                    index_name(spec.attribute),
                    expression(spec.attribute)
                ))
                .map_err(|e| sqlite_error("cannot create an index", e))?;
            indexed.push(spec.attribute);
        }
        Ok(SqliteIndexEngine {
            connection,
            indexed,
            path,
            cache_kib,
        })
    }

    /// A connection status counter (`SQLITE_DBSTATUS_*`), cumulative.
    fn status(&self, operation: i32) -> Option<u64> {
        let mut current = 0;
        let mut highwater = 0;
        // SAFETY: the handle is valid while `self.connection` lives, and sqlite3_db_status
        // only reads the connection's counters into the two integers.
        let code = unsafe {
            ffi::sqlite3_db_status(
                self.connection.handle(),
                operation,
                &raw mut current,
                &raw mut highwater,
                0,
            )
        };
        (code == ffi::SQLITE_OK).then(|| u64::try_from(current).unwrap_or(0))
    }

    fn check_indexed(&self, attribute: Attribute) -> Result<(), BenchError> {
        if self.indexed.contains(&attribute) {
            Ok(())
        } else {
            Err(BenchError::new(format!(
                "sqlite: no index on {}",
                attribute.path()
            )))
        }
    }

    /// Runs a hit query and reads every hit's document.
    fn hits(
        &self,
        sql: &str,
        parameters: &[&dyn rusqlite::ToSql],
        mut hit_ids: Option<&mut Vec<u64>>,
    ) -> Result<u64, BenchError> {
        let mut statement = self
            .connection
            .prepare_cached(sql)
            .map_err(|e| sqlite_error("cannot prepare a query", e))?;
        let mut rows = statement
            .query(parameters)
            .map_err(|e| sqlite_error("query failed", e))?;
        let mut hits = 0;
        let mut document_bytes = 0;
        while let Some(row) = rows.next().map_err(|e| sqlite_error("query failed", e))? {
            let tweet_id: i64 = row.get(0).map_err(|e| sqlite_error("bad tweet_id", e))?;
            let document = row
                .get_ref(1)
                .and_then(|value| value.as_str().map_err(Into::into))
                .map_err(|e| sqlite_error("bad document", e))?;
            document_bytes += document.len();
            hits += 1;
            if let Some(ids) = hit_ids.as_deref_mut() {
                ids.push(tweet_id as u64);
            }
        }
        std::hint::black_box(document_bytes);
        Ok(hits)
    }
}

impl IndexEngine for SqliteIndexEngine {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn index_labels(&self, attribute: Attribute) -> Option<(String, String)> {
        self.indexed
            .contains(&attribute)
            .then(|| ("json-expression-btree".to_owned(), "sync-full".to_owned()))
    }

    fn settings_note(&self) -> String {
        format!(
            "sqlite {}: journal_mode=WAL synchronous=NORMAL (commits not fsynced) \
             cache_size={} KiB, one transaction per PUT",
            rusqlite::version(),
            self.cache_kib
        )
    }

    fn put(&self, tweet_id: u64, json: &str) -> Result<(), BenchError> {
        let mut statement = self
            .connection
            .prepare_cached("INSERT OR REPLACE INTO docs(tweet_id, doc) VALUES (?1, ?2)")
            .map_err(|e| sqlite_error("cannot prepare the insert", e))?;
        statement
            .execute(params![tweet_id as i64, json])
            .map_err(|e| sqlite_error(&format!("cannot store tweet {tweet_id}"), e))?;
        Ok(())
    }

    fn get(&self, tweet_id: u64) -> Result<Option<usize>, BenchError> {
        let mut statement = self
            .connection
            .prepare_cached("SELECT doc FROM docs WHERE tweet_id = ?1")
            .map_err(|e| sqlite_error("cannot prepare the get", e))?;
        let mut rows = statement
            .query(params![tweet_id as i64])
            .map_err(|e| sqlite_error("get failed", e))?;
        match rows.next().map_err(|e| sqlite_error("get failed", e))? {
            Some(row) => {
                let document = row
                    .get_ref(0)
                    .and_then(|value| value.as_str().map_err(Into::into))
                    .map_err(|e| sqlite_error("bad document", e))?;
                Ok(Some(document.len()))
            }
            None => Ok(None),
        }
    }

    fn lookup(
        &self,
        attribute: Attribute,
        value: i64,
        top_k: Option<usize>,
        hit_ids: Option<&mut Vec<u64>>,
    ) -> Result<u64, BenchError> {
        self.check_indexed(attribute)?;
        let sql = format!(
            "SELECT tweet_id, doc FROM docs WHERE {} = ?1 ORDER BY rowid DESC LIMIT ?2",
            expression(attribute)
        );
        self.hits(
            &sql,
            &[&sql_value(attribute, value), &limit(top_k)],
            hit_ids,
        )
    }

    fn range_lookup(
        &self,
        attribute: Attribute,
        lo: i64,
        hi: i64,
        top_k: Option<usize>,
        hit_ids: Option<&mut Vec<u64>>,
    ) -> Result<u64, BenchError> {
        self.check_indexed(attribute)?;
        // Times are whole seconds: a lower bound inside a second rounds up to the next one
        // (the upper bound's text rounds down).
        let lo = match attribute {
            Attribute::CreationTime if lo.rem_euclid(1000) != 0 => {
                lo.div_euclid(1000).saturating_add(1).saturating_mul(1000)
            }
            _ => lo,
        };
        if lo > hi {
            return Ok(0);
        }
        let sql = format!(
            "SELECT tweet_id, doc FROM docs WHERE {} BETWEEN ?1 AND ?2 \
             ORDER BY rowid DESC LIMIT ?3",
            expression(attribute)
        );
        self.hits(
            &sql,
            &[
                &sql_value(attribute, lo),
                &sql_value(attribute, hi),
                &limit(top_k),
            ],
            hit_ids,
        )
    }

    /// Checkpoints the WAL into the database file and truncates it.
    fn flush(&self) -> Result<(), BenchError> {
        self.connection
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(|e| sqlite_error("checkpoint failed", e))
    }

    fn wait_for_background_work(&self) -> Result<(), BenchError> {
        Ok(())
    }

    /// Pages read (page-cache hits and misses); SQLite keeps no count of bytes written (the
    /// rows' `process_write_bytes` measures them).
    fn counters(&self) -> EngineCounters {
        let hits = self.status(ffi::SQLITE_DBSTATUS_CACHE_HIT);
        let misses = self.status(ffi::SQLITE_DBSTATUS_CACHE_MISS);
        EngineCounters {
            bytes_written: None,
            blocks_read: hits.zip(misses).map(|(hits, misses)| hits + misses),
        }
    }

    /// Per table and index from the `dbstat` virtual table when SQLite has it, else the
    /// database file; plus the WAL file.
    fn disk_bytes_per_tree(&self) -> Result<TreeBytes, BenchError> {
        let mut trees = TreeBytes::new();
        let per_tree = self
            .connection
            .prepare("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name");
        if let Ok(mut statement) = per_tree {
            let rows = statement
                .query_map([], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
                })
                .map_err(|e| sqlite_error("dbstat failed", e))?;
            for row in rows {
                let (name, bytes) = row.map_err(|e| sqlite_error("dbstat failed", e))?;
                trees.insert(name, bytes as u64);
            }
        } else {
            let bytes = std::fs::metadata(&self.path)
                .map_err(|e| BenchError::new(format!("cannot stat {}: {e}", self.path.display())))?
                .len();
            trees.insert("database".to_owned(), bytes);
        }
        let wal = self.path.with_extension("sqlite-wal");
        trees.insert(
            "wal".to_owned(),
            std::fs::metadata(&wal).map_or(0, |metadata| metadata.len()),
        );
        Ok(trees)
    }

    fn close(self: Box<Self>) -> Result<(), BenchError> {
        self.connection
            .close()
            .map_err(|(_, e)| sqlite_error("close failed", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_bench::index::verify::{verify_against_reference, verify_indexes, VerifyConfig};
    use sift_bench::index::{run_index_benchmark, Workload};

    fn config() -> IndexBenchConfig {
        let mut config = IndexBenchConfig::small(400, Workload::Static);
        config.indexes = verify_indexes("x");
        config.cache_bytes = 1 << 20;
        config
    }

    #[test]
    fn answers_like_the_reference() {
        let dir = tempfile::tempdir().unwrap();
        let engine = SqliteIndexEngine::create(&config(), dir.path()).unwrap();
        let summary = verify_against_reference(&engine, VerifyConfig::default()).unwrap();
        assert!(summary.answers > 300, "{summary:?}");
        assert!(summary.overwrites > 300, "{summary:?}");
    }

    #[test]
    fn queries_use_the_expression_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let engine = SqliteIndexEngine::create(&config(), dir.path()).unwrap();
        for attribute in Attribute::ALL {
            let plan: Vec<String> = engine
                .connection
                .prepare(&format!(
                    "EXPLAIN QUERY PLAN SELECT tweet_id, doc FROM docs WHERE {} = ?1 \
                     ORDER BY rowid DESC LIMIT 10",
                    expression(attribute)
                ))
                .unwrap()
                .query_map([1], |row| row.get::<_, String>(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let plan = plan.join("; ");
            assert!(plan.contains(&index_name(attribute)), "{plan}");
            assert!(!plan.contains("TEMP B-TREE"), "no sort needed: {plan}");
        }
    }

    #[test]
    fn runs_the_benchmark() {
        let dir = tempfile::tempdir().unwrap();
        let config = config();
        let engine = SqliteIndexEngine::create(&config, dir.path()).unwrap();
        let rows = run_index_benchmark(&config, &engine, &mut |_| Ok(())).unwrap();
        let load = rows
            .iter()
            .find(|r| r.phase == "load" && r.slice.is_none())
            .unwrap();
        assert_eq!(load.n, 400);
        assert_eq!(
            load.index_kind.as_deref(),
            Some("json-expression-btree+json-expression-btree")
        );
        let trees = load.bytes_on_disk_per_tree.as_ref().unwrap();
        assert!(load.bytes_on_disk.unwrap() > 200_000, "{trees:?}");
        assert_eq!(trees.get("wal"), Some(&0), "checkpointed: {trees:?}");
        let lookup = rows.iter().find(|r| r.op == "LOOKUP").unwrap();
        assert!(lookup.blocks_per_op.unwrap() > 0.0);
        assert!(lookup.settings.contains("synchronous=NORMAL"));
        Box::new(engine).close().unwrap();
    }
}

//! Document and index commands: `import`, `index create|list|drop`, `get`, `put`, `delete`,
//! `lookup`, `range`, `within`, `stats`. Each opens the database, does one thing, and closes it.
//! Tables for people on stdout; `--json` for scripts; errors are returned to `main`, which
//! prints them to stderr and exits non-zero.

use clap::{Args, Subcommand};
use sift_index::{
    AttrType, AttrValue, Database, DatabaseOptions, GeoBox, Hit, IndexKind, IndexSpec, Maintenance,
    QueryResult, WriteOp,
};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::time::Instant;

/// Documents per engine batch during `import`.
const IMPORT_BATCH_DOCUMENTS: usize = 512;

#[derive(Debug, Args)]
pub struct DbArgs {
    /// Database directory.
    #[arg(long, required_unless_present = "cluster")]
    pub db: Option<PathBuf>,
    /// A node of a cluster (`host:port`) instead of a local database (docs/cluster.md): for
    /// get, put, delete, import, lookup, range, within, index create and index drop.
    #[arg(long, conflicts_with = "db")]
    pub cluster: Option<String>,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Collection to import into (created if missing).
    #[arg(long)]
    pub collection: String,
    /// Primary-key field (`tweet_id`, `user.id` or `/user/id`); must match an existing
    /// collection's.
    #[arg(long)]
    pub pk: String,
    /// Abort at the first bad line instead of skipping it.
    #[arg(long)]
    pub strict: bool,
    /// JSON Lines file, one document per line.
    pub file: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum IndexCommand {
    /// Creates an index (back-filling existing documents).
    Create(IndexCreateArgs),
    /// Lists collections and their indexes.
    List(IndexListArgs),
    /// Drops an index and its data.
    Drop(IndexDropArgs),
}

#[derive(Debug, Args)]
pub struct IndexCreateArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[arg(long)]
    pub collection: String,
    #[arg(long)]
    pub name: String,
    /// Attribute path (`user.id` or `/user/id`).
    #[arg(long)]
    pub path: String,
    /// int, float, string, time or geo.
    #[arg(long = "type")]
    pub attr_type: AttrType,
    /// composite, eager, lazy, memory, embedded, sst-local or next.
    #[arg(long)]
    pub kind: IndexKind,
    /// sst-local / next: δ of the value-aware split of secondary blocks (int/float: a value
    /// gap; time: milliseconds; string: a prefix length in bytes).
    #[arg(long)]
    pub delta: Option<sift_index::SplitDelta>,
    /// sst-local / next: memo or get-lite [default: get-lite].
    #[arg(long)]
    pub validation: Option<sift_index::Validation>,
    /// sync-full, sync-insert or deferred (composite only) [default: the kind's default;
    /// sync-full for --unique].
    #[arg(long)]
    pub maintenance: Option<Maintenance>,
    /// Delete stale entries that queries meet (sync-insert only).
    #[arg(long)]
    pub read_repair: bool,
    /// Embedded indexes: bits per value of the per-block bloom filters [default: 10].
    #[arg(long)]
    pub bloom_bits_per_key: Option<u32>,
    /// Reject writes giving a value another live document holds (composite or eager,
    /// sync-full).
    #[arg(long)]
    pub unique: bool,
}

#[derive(Debug, Args)]
pub struct IndexListArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[arg(long)]
    pub collection: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct IndexDropArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[arg(long)]
    pub collection: String,
    #[arg(long)]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct PkArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[arg(long)]
    pub collection: String,
    /// Primary key (a string key as is; an integer key as its decimal text).
    #[arg(long)]
    pub pk: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PutArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[arg(long)]
    pub collection: String,
    /// The document, a JSON object.
    #[arg(long)]
    pub doc: String,
}

#[derive(Debug, Args)]
pub struct LookupArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[arg(long)]
    pub collection: String,
    #[arg(long)]
    pub index: String,
    /// The value, written as for the index type (`42`, `2020-01-01T00:00:00Z`, `abc`).
    #[arg(long)]
    pub value: String,
    /// At most this many hits, newest first [default: all].
    #[arg(long)]
    pub limit: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RangeArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[arg(long)]
    pub collection: String,
    #[arg(long)]
    pub index: String,
    /// Lower bound, inclusive.
    #[arg(long)]
    pub from: String,
    /// Upper bound, inclusive.
    #[arg(long)]
    pub to: String,
    #[arg(long)]
    pub limit: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct WithinArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[arg(long)]
    pub collection: String,
    /// A geo index (kind memory, composite, next or sst-local).
    #[arg(long)]
    pub index: String,
    /// The box `min_lon,min_lat,max_lon,max_lat` in degrees; points on its edges are inside.
    #[arg(long, allow_hyphen_values = true)]
    pub bbox: String,
    /// At most this many hits, newest first [default: all].
    #[arg(long)]
    pub limit: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[arg(long)]
    pub json: bool,
}

fn open(db: &DbArgs) -> Result<Database, String> {
    let Some(path) = &db.db else {
        return Err(
            "this command does not take --cluster yet (get, put, delete, import, lookup, \
             range, within, index create and index drop do)"
                .into(),
        );
    };
    Database::open(path, DatabaseOptions::default())
        .map_err(|e| format!("cannot open {}: {e}", path.display()))
}

fn close(database: Database) -> Result<(), String> {
    database
        .close()
        .map_err(|e| format!("closing the database: {e}"))
}

pub fn import(args: &ImportArgs) -> Result<(), String> {
    if let Some(address) = &args.db.cluster {
        return crate::cluster::import(address, args);
    }
    let file = std::fs::File::open(&args.file)
        .map_err(|e| format!("cannot read {}: {e}", args.file.display()))?;
    let file_bytes = file.metadata().map_or(0, |m| m.len());
    let database = open(&args.db)?;
    match database.collection(&args.collection) {
        Ok(info) if info.record.pk_path != args.pk => {
            return Err(format!(
                "collection {:?} has primary key {:?}, not {:?}",
                args.collection, info.record.pk_path, args.pk
            ));
        }
        Ok(_) => {}
        Err(_) => {
            database
                .create_collection(&args.collection, &args.pk)
                .map_err(|e| e.to_string())?;
        }
    }
    let progress = indicatif::ProgressBar::new(file_bytes);
    progress.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {bytes}/{total_bytes} {msg} ({bytes_per_sec}, ETA {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    let mut counts = ImportCounts::default();
    let mut pending: Vec<(usize, String)> = Vec::with_capacity(IMPORT_BATCH_DOCUMENTS);
    let reader = BufReader::new(file);
    for (index, line) in reader.lines().enumerate() {
        let line_number = index + 1;
        let line = line.map_err(|e| format!("{}: line {line_number}: {e}", args.file.display()))?;
        progress.inc(line.len() as u64 + 1);
        if line.trim().is_empty() {
            continue;
        }
        pending.push((line_number, line));
        if pending.len() == IMPORT_BATCH_DOCUMENTS {
            import_batch(&database, args, &mut pending, &mut counts, &progress)?;
            progress.set_message(format!("{} documents", counts.imported));
        }
    }
    import_batch(&database, args, &mut pending, &mut counts, &progress)?;
    progress.finish_and_clear();
    close(database)?;
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "imported {} documents into {:?} in {seconds:.1} s ({:.0} documents/s); {} bad lines skipped",
        counts.imported,
        args.collection,
        counts.imported as f64 / seconds.max(1e-9),
        counts.skipped
    );
    Ok(())
}

#[derive(Debug, Default)]
struct ImportCounts {
    imported: u64,
    skipped: u64,
}

/// Writes the pending documents as one atomic batch; if the batch is refused (a bad document
/// in it), writes them one by one so only the bad lines are left out — never half a document.
fn import_batch(
    database: &Database,
    args: &ImportArgs,
    pending: &mut Vec<(usize, String)>,
    counts: &mut ImportCounts,
    progress: &indicatif::ProgressBar,
) -> Result<(), String> {
    if pending.is_empty() {
        return Ok(());
    }
    let ops: Vec<WriteOp<'_>> = pending
        .iter()
        .map(|(_, line)| WriteOp::Put(line.as_bytes()))
        .collect();
    if database.write(&args.collection, &ops).is_ok() {
        counts.imported += pending.len() as u64;
        pending.clear();
        return Ok(());
    }
    for (line_number, line) in pending.drain(..) {
        match database.put(&args.collection, line.as_bytes()) {
            Ok(_) => counts.imported += 1,
            Err(e) if args.strict => {
                return Err(format!(
                    "{}: line {line_number}: {e} (nothing from this line was written; stopping because of --strict)",
                    args.file.display()
                ));
            }
            Err(e) => {
                counts.skipped += 1;
                progress.suspend(|| {
                    eprintln!(
                        "sift: {}: line {line_number} skipped: {e}",
                        args.file.display()
                    );
                });
            }
        }
    }
    Ok(())
}

pub fn index(command: &IndexCommand) -> Result<(), String> {
    match command {
        IndexCommand::Create(args) if args.db.cluster.is_some() => {
            crate::cluster::create_index(args)
        }
        IndexCommand::Drop(args) if args.db.cluster.is_some() => crate::cluster::drop_index(args),
        IndexCommand::Create(args) => {
            let database = open(&args.db)?;
            let mut spec = IndexSpec::new(&args.name, &args.path, args.attr_type, args.kind)
                .with_read_repair(args.read_repair)
                .with_unique(args.unique);
            if let Some(m) = args.maintenance {
                spec = spec.with_maintenance(m);
            }
            if let Some(delta) = args.delta {
                spec = spec.with_split_delta(delta);
            }
            if let Some(validation) = args.validation {
                spec = spec.with_validation(validation);
            }
            if let Some(bits) = args.bloom_bits_per_key {
                spec = spec.with_bloom_bits_per_key(bits);
            }
            let start = Instant::now();
            let bar = indicatif::ProgressBar::new_spinner();
            let record = database
                .create_index_with_progress(&args.collection, spec, &mut |p| {
                    bar.set_message(format!("back-filled {} documents", p.documents_done));
                    bar.tick();
                })
                .map_err(|e| e.to_string())?;
            bar.finish_and_clear();
            close(database)?;
            println!(
                "created index {:?} on {:?} ({} {}, {}) in {:.1} s",
                record.name,
                record.path,
                record.kind,
                record.attr_type,
                record.maintenance,
                start.elapsed().as_secs_f64()
            );
            Ok(())
        }
        IndexCommand::List(args) => {
            let database = open(&args.db)?;
            let collections = database.collections();
            let mut out = std::io::stdout().lock();
            for info in &collections {
                if args
                    .collection
                    .as_ref()
                    .is_some_and(|c| *c != info.record.name)
                {
                    continue;
                }
                if args.json {
                    for index in &info.indexes {
                        let row = serde_json::json!({
                            "collection": info.record.name,
                            "pk": info.record.pk_path,
                            "index": index.name,
                            "path": index.path,
                            "type": index.attr_type.to_string(),
                            "kind": index.kind.name(),
                            "maintenance": index.maintenance.name(),
                            "read_repair": index.read_repair,
                            "unique": index.unique,
                            "state": format!("{:?}", index.state).to_lowercase(),
                        });
                        writeln!(out, "{row}").map_err(|e| e.to_string())?;
                    }
                } else {
                    writeln!(
                        out,
                        "collection {} (primary key {})",
                        info.record.name, info.record.pk_path
                    )
                    .map_err(|e| e.to_string())?;
                    for index in &info.indexes {
                        writeln!(
                            out,
                            "  {:<20} {:<20} {:<7} {:<10} {:<12} {:?}{}",
                            index.name,
                            index.path,
                            index.attr_type.to_string(),
                            index.kind.name(),
                            index.maintenance.name(),
                            index.state,
                            if index.unique { " unique" } else { "" }
                        )
                        .map_err(|e| e.to_string())?;
                    }
                }
            }
            close(database)
        }
        IndexCommand::Drop(args) => {
            let database = open(&args.db)?;
            database
                .drop_index(&args.collection, &args.name)
                .map_err(|e| e.to_string())?;
            close(database)?;
            println!("dropped index {:?} of {:?}", args.name, args.collection);
            Ok(())
        }
    }
}

fn print_hits(hits: &[Hit], json: bool) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    for hit in hits {
        let pk = String::from_utf8_lossy(&hit.pk);
        let doc = String::from_utf8_lossy(&hit.doc);
        if json {
            let doc: serde_json::Value = serde_json::from_slice(&hit.doc)
                .map_err(|e| format!("stored document {pk:?} is not JSON: {e}"))?;
            let row = serde_json::json!({"pk": pk, "seq": hit.seq, "doc": doc});
            writeln!(out, "{row}").map_err(|e| e.to_string())?;
        } else {
            writeln!(out, "{pk}\tseq {}\t{doc}", hit.seq).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

fn print_result(result: &QueryResult, json: bool) -> Result<(), String> {
    print_hits(&result.hits, json)?;
    let s = result.stats;
    eprintln!(
        "{} hits; {} candidates examined, {} validations, {} stale, {} blocks read",
        result.hits.len(),
        s.candidates_examined,
        s.validations,
        s.stale_entries,
        s.blocks_read
    );
    Ok(())
}

pub fn get(args: &PkArgs) -> Result<(), String> {
    if let Some(address) = &args.db.cluster {
        return crate::cluster::get(address, &args.collection, &args.pk, args.json);
    }
    let database = open(&args.db)?;
    let hit = database
        .get(&args.collection, args.pk.as_bytes())
        .map_err(|e| e.to_string())?;
    close(database)?;
    match hit {
        Some(hit) => print_hits(&[hit], args.json),
        None => Err(format!(
            "no document with primary key {:?} in {:?}",
            args.pk, args.collection
        )),
    }
}

pub fn put(args: &PutArgs) -> Result<(), String> {
    if let Some(address) = &args.db.cluster {
        return crate::cluster::put(address, &args.collection, &args.doc);
    }
    let database = open(&args.db)?;
    let seq = database
        .put(&args.collection, args.doc.as_bytes())
        .map_err(|e| e.to_string())?;
    close(database)?;
    println!("stored at sequence number {seq}");
    Ok(())
}

pub fn delete(args: &PkArgs) -> Result<(), String> {
    if let Some(address) = &args.db.cluster {
        return crate::cluster::delete(address, &args.collection, &args.pk);
    }
    let database = open(&args.db)?;
    let deleted = database
        .delete(&args.collection, args.pk.as_bytes())
        .map_err(|e| e.to_string())?;
    close(database)?;
    match deleted {
        Some(seq) => println!("deleted at sequence number {seq}"),
        None => println!(
            "no document with primary key {:?}; nothing deleted",
            args.pk
        ),
    }
    Ok(())
}

fn index_type(database: &Database, collection: &str, index: &str) -> Result<AttrType, String> {
    database
        .index_type(collection, index)
        .map_err(|e| e.to_string())
}

pub fn lookup(args: &LookupArgs) -> Result<(), String> {
    if let Some(address) = &args.db.cluster {
        let query = sift_cluster::rpc::messages::Query::Lookup {
            value: args.value.clone(),
        };
        return crate::cluster::query(
            address,
            &args.collection,
            &args.index,
            query,
            args.limit,
            args.json,
        );
    }
    let database = open(&args.db)?;
    let attr_type = index_type(&database, &args.collection, &args.index)?;
    let value = AttrValue::parse_cli(&args.value, attr_type).map_err(|e| e.to_string())?;
    let result = database
        .lookup(&args.collection, &args.index, &value, args.limit)
        .map_err(|e| e.to_string())?;
    close(database)?;
    print_result(&result, args.json)
}

pub fn range(args: &RangeArgs) -> Result<(), String> {
    if let Some(address) = &args.db.cluster {
        let query = sift_cluster::rpc::messages::Query::Range {
            from: args.from.clone(),
            to: args.to.clone(),
        };
        return crate::cluster::query(
            address,
            &args.collection,
            &args.index,
            query,
            args.limit,
            args.json,
        );
    }
    let database = open(&args.db)?;
    let attr_type = index_type(&database, &args.collection, &args.index)?;
    let lo = AttrValue::parse_cli(&args.from, attr_type).map_err(|e| format!("--from: {e}"))?;
    let hi = AttrValue::parse_cli(&args.to, attr_type).map_err(|e| format!("--to: {e}"))?;
    let result = database
        .range(&args.collection, &args.index, &lo, &hi, args.limit)
        .map_err(|e| e.to_string())?;
    close(database)?;
    print_result(&result, args.json)
}

pub fn within(args: &WithinArgs) -> Result<(), String> {
    if let Some(address) = &args.db.cluster {
        let query = sift_cluster::rpc::messages::Query::Within {
            bbox: args.bbox.clone(),
        };
        return crate::cluster::query(
            address,
            &args.collection,
            &args.index,
            query,
            args.limit,
            args.json,
        );
    }
    let geo_box = GeoBox::parse(&args.bbox).map_err(|e| format!("--bbox: {e}"))?;
    let database = open(&args.db)?;
    let result = database
        .within(&args.collection, &args.index, &geo_box, args.limit)
        .map_err(|e| e.to_string())?;
    close(database)?;
    print_result(&result, args.json)
}

pub fn stats(args: &StatsArgs) -> Result<(), String> {
    let database = open(&args.db)?;
    let engine_stats = database.engine().stats();
    let bytes_of = |tree: &str| -> (u64, Vec<usize>) {
        engine_stats
            .trees
            .iter()
            .find(|t| t.name == tree)
            .map_or((0, Vec::new()), |t| {
                (
                    t.levels.iter().map(|l| l.bytes).sum(),
                    t.levels.iter().map(|l| l.files).collect(),
                )
            })
    };
    let mut out = std::io::stdout().lock();
    for info in database.collections() {
        let primary = info.record.primary_tree_name();
        let documents = count_keys(&database, &primary)?;
        let (bytes, files) = bytes_of(&primary);
        if args.json {
            let row = serde_json::json!({"collection": info.record.name, "documents": documents,
                "tree": primary, "bytes_on_disk": bytes, "files_per_level": files});
            writeln!(out, "{row}").map_err(|e| e.to_string())?;
        } else {
            writeln!(
                out,
                "collection {}: {documents} documents, {bytes} bytes on disk, files per level {files:?}",
                info.record.name
            )
            .map_err(|e| e.to_string())?;
        }
        for index in &info.indexes {
            let (bytes, files) = index.tree.as_deref().map_or((0, Vec::new()), bytes_of);
            let entries = match index.tree.as_deref() {
                Some(tree) => count_keys(&database, tree)?,
                None => 0,
            };
            let memory = database
                .memory_bytes(&info.record.name, &index.name)
                .unwrap_or(0);
            let garbage = (index.maintenance == Maintenance::Deferred)
                .then(|| database.deferred_garbage(&info.record.name, &index.name))
                .transpose()
                .map_err(|e| e.to_string())?;
            if let Some(g) = &garbage {
                if args.json {
                    let row = serde_json::json!({"collection": info.record.name,
                        "index": index.name, "deferred_garbage_entries": g.garbage_entries,
                        "live_entries": g.live_entries, "stored_entries": g.stored_entries,
                        "stored_tombstones": g.stored_tombstones});
                    writeln!(out, "{row}").map_err(|e| e.to_string())?;
                } else {
                    writeln!(
                        out,
                        "  index {} (deferred): {} garbage entries awaiting their DELETE, {} live; tables store {} entries of which {} DELETEs",
                        index.name, g.garbage_entries, g.live_entries, g.stored_entries, g.stored_tombstones
                    )
                    .map_err(|e| e.to_string())?;
                }
            }
            if args.json {
                let row = serde_json::json!({"collection": info.record.name, "index": index.name,
                    "kind": index.kind.name(), "entries": entries, "bytes_on_disk": bytes,
                    "files_per_level": files, "memory_bytes": memory});
                writeln!(out, "{row}").map_err(|e| e.to_string())?;
            } else {
                writeln!(
                    out,
                    "  index {} ({}): {entries} keys, {bytes} bytes on disk, files per level {files:?}, {memory} bytes in memory",
                    index.name,
                    index.kind.name()
                )
                .map_err(|e| e.to_string())?;
            }
        }
    }
    print_async_stats(&database, args.json, &mut out)?;
    close(database)
}

/// Asynchronous maintenance (since this open: updates queued again from the primary, the
/// queue, the lag histogram), if the database has asynchronous indexes.
fn print_async_stats(
    database: &Database,
    json: bool,
    out: &mut impl std::io::Write,
) -> Result<(), String> {
    let has_async = database.collections().iter().any(|info| {
        info.indexes
            .iter()
            .any(|index| index.maintenance.is_async())
    });
    if !has_async {
        return Ok(());
    }
    let s = database.async_index_stats();
    let line = if json {
        serde_json::json!({"async_index": {"queue_length": s.queue_length,
            "updates_queued": s.updates_queued, "updates_recovered": s.updates_recovered,
            "updates_applied": s.updates_applied, "failed_attempts": s.failed_attempts,
            "persistent_failure": s.persistent_failure, "durable_watermark": s.durable_watermark,
            "watermark_written": s.watermark_written,
            "lag_us_p50": s.lag_us_p50, "lag_us_p99": s.lag_us_p99, "lag_us_max": s.lag_us_max,
            "lag_histogram": s.lag_histogram, "flush_drains": s.flush_drains}})
        .to_string()
    } else {
        format!(
            "async index maintenance: queue {} (oldest {} us), {} updates queued ({} recovered at open), {} applied, {} failed attempts{}, watermark {}, lag p50 {} us p99 {} us max {} us",
            s.queue_length,
            s.oldest_pending_us,
            s.updates_queued,
            s.updates_recovered,
            s.updates_applied,
            s.failed_attempts,
            if s.persistent_failure { " (persistent failure)" } else { "" },
            s.durable_watermark,
            s.lag_us_p50,
            s.lag_us_p99,
            s.lag_us_max
        )
    };
    writeln!(out, "{line}").map_err(|e| e.to_string())
}

/// Keys in an engine tree (live, at the latest state).
fn count_keys(database: &Database, tree: &str) -> Result<u64, String> {
    let engine = database.engine();
    let tree = engine.tree(tree).map_err(|e| e.to_string())?;
    let mut iter = engine
        .iter(&tree, sift_lsm::ReadOptions::default())
        .map_err(|e| e.to_string())?;
    iter.seek_to_first().map_err(|e| e.to_string())?;
    let mut n = 0;
    while iter.valid() {
        n += 1;
        iter.next().map_err(|e| e.to_string())?;
    }
    Ok(n)
}

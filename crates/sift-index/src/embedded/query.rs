//! LOOKUP and RANGE on an `embedded` index (LevelDB++ Algorithms 5 and 8), exact.
//!
//! One engine view of the primary tree (at the query's snapshot) is walked component by
//! component, newest first: the memtables through the index's map of recent writes (or, when
//! the map cannot be trusted for this view, by scanning them), then each L0 file, then each
//! level. A table is skipped when its zone map (from the manifest) rules the query out; a data
//! block is read only if its zone map intersects the query and, for a LOOKUP, its bloom filter
//! passes. Bytes that do not describe the attribute (tables older than the index) never cause
//! a skip. With K hits known, a table or block whose largest sequence number cannot beat the
//! K-th is skipped too, and the walk stops after the first component past which nothing can.
//!
//! Validation (the Pebble trap: a skipped block may hold a newer version of a key whose older
//! version matches): a matching version is the live one only if no newer version of its key
//! exists (a) earlier in its own block (seen while reading it), (b) at the end of the previous
//! block of its component (checked if that block was read; else its index separator, or its
//! file's largest key, usually shows it ends below the key; only otherwise a point read, which
//! would read this very block again), and
//! (c) in a component above — the engine's GetLite answers from memory (memtables exactly,
//! tables by key range and bloom filter); on "maybe" a point read decides. A document is
//! returned once, in its live version; stale versions never count toward K.

use super::collector::{block_seq_max, find_attr, value_hash, PropertyCorruption, COLLECTOR_NAME};
use super::{BlockOrder, EmbeddedIndex};
use crate::envelope::EnvelopeRef;
use crate::error::Result;
use crate::kind::query::{Hit, QueryStats, TopK};
use crate::kind::{Collection, Index};
use sift_lsm::extension::parse_internal_key;
use sift_lsm::extension::ComponentView;
use sift_lsm::extension::FileMetaData;
use sift_lsm::extension::{ReadContext, Table};
use sift_lsm::{ComponentId, Db, NewerVersion, ReadOptions, SeqNo, ValueKind};
use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

/// One query's inputs and outputs.
pub(crate) struct Request<'a> {
    pub engine: &'a Db,
    pub collection: &'a Collection,
    pub index: &'a Index,
    pub embedded: &'a EmbeddedIndex,
    /// `[start, end)` over encoded values; a LOOKUP's `start` is the value's encoding.
    pub start: &'a [u8],
    pub end: Option<&'a [u8]>,
    pub point: bool,
    /// Carries the query's snapshot and read statistics.
    pub read: &'a ReadOptions,
    pub top: &'a mut TopK,
    pub stats: &'a mut QueryStats,
}

/// What the previous block of a component says about a key's newer versions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Before {
    /// No block precedes (first block of an L0 file or of a level), or it was read and does
    /// not end with the key.
    Clean,
    /// It was read and ends with a visible version of the key.
    Newer,
    /// It was not read (skipped, or not yet): only a point read can tell.
    Unknown,
}

/// A table whose blocks are visited newest first.
struct Source {
    component: ComponentId,
    table: Arc<Table>,
    /// The block before the table's first block in its component (`None`: none;
    /// `(u64::MAX, _)`: a file skipped unopened).
    before_first: Option<(u64, usize)>,
    /// The previous file of the level (with `before_first`): its largest key bounds the
    /// block's last key.
    previous_file: Option<Arc<FileMetaData>>,
    order: Arc<BlockOrder>,
    /// Position in `order` of the next block to visit.
    next: usize,
}

/// The block before a block in its component.
#[derive(Clone, Copy)]
struct Predecessor<'k> {
    /// (file number, block ordinal); `(u64::MAX, _)`: a file skipped unopened.
    place: (u64, usize),
    /// A user key `>=` the block's last user key, known without reading the block (its index
    /// separator, or its file's largest key): when it is below a key, the block holds no
    /// version of that key.
    last_user_key_bound: Option<&'k [u8]>,
}

struct Scan<'a, 'r> {
    request: &'r mut Request<'a>,
    view: ComponentView,
    context: ReadContext,
    point_hash: Option<u64>,
    emitted: HashSet<Vec<u8>>,
    /// Last entry (user key, sequence number) of every data block read, by (file, ordinal).
    tails: HashMap<(u64, usize), (Vec<u8>, SeqNo)>,
}

fn corruption(path: &Path, offset: u64, what: &str, error: &PropertyCorruption) -> sift_lsm::Error {
    sift_lsm::Error::corruption(
        path,
        offset,
        format!(
            "{what}: {} (byte {} of the embedded-index property)",
            error.message, error.offset
        ),
    )
}

/// Runs the query, pushing hits into `request.top`.
pub(crate) fn run(mut request: Request<'_>) -> Result<()> {
    let view = request
        .engine
        .components(&request.collection.primary, request.read)?;
    let point_hash = request.point.then(|| value_hash(request.start));
    let context = ReadContext::from_read_options(request.read);
    let mut scan = Scan {
        request: &mut request,
        view,
        context,
        point_hash,
        emitted: HashSet::new(),
        tails: HashMap::new(),
    };
    scan.run()
}

impl Scan<'_, '_> {
    fn in_range(&self, value: &[u8]) -> bool {
        value >= self.request.start && self.request.end.is_none_or(|end| value < end)
    }

    /// The K-th newest hit's sequence number, once K hits are known.
    fn floor(&self) -> Option<SeqNo> {
        if self.request.top.is_full() {
            self.request.top.min_seq()
        } else {
            None
        }
    }

    fn cannot_enter(&self, seq_max: SeqNo) -> bool {
        self.floor().is_some_and(|floor| seq_max <= floor)
    }

    fn run(&mut self) -> Result<()> {
        let ids = self.view.ids();
        // Table components with their files (L0: one file each; levels: in key order).
        let mut tables: Vec<(ComponentId, Vec<Arc<FileMetaData>>)> = Vec::new();
        let level0 = self.view.files(0);
        for id in &ids {
            match *id {
                ComponentId::Level0File(number) => {
                    let files: Vec<_> = level0
                        .iter()
                        .filter(|f| f.number == number)
                        .cloned()
                        .collect();
                    tables.push((*id, files));
                }
                ComponentId::Level(level) => tables.push((*id, self.view.files(level))),
                ComponentId::Memtable | ComponentId::ImmutableMemtable(_) => {}
            }
        }
        let tables_seq_max = tables
            .iter()
            .flat_map(|(_, files)| files.iter().map(|f| f.seq_max))
            .max()
            .unwrap_or(0);

        // Memtables. Everything above the tables' largest sequence number is in them.
        self.request.stats.components_read += 1;
        let (candidates, pruned_through) = self.request.embedded.map.candidates(
            self.request.start,
            self.request.end,
            tables_seq_max,
            self.view.sequence(),
        );
        if pruned_through <= tables_seq_max {
            self.take_map_candidates(candidates)?;
        } else {
            // The map forgot writes that this view still holds in memtables (a flush
            // finished between the view and the map read, or the compaction of the newest
            // entries lowered the tables' largest sequence number).
            for id in ids.iter().filter(|id| {
                matches!(
                    id,
                    ComponentId::Memtable | ComponentId::ImmutableMemtable(_)
                )
            }) {
                self.scan_memtable(*id)?;
            }
        }

        // Tables: every block that may hold a hit, newest block first (by its largest
        // sequence number), so that with a limit the K newest hits are known early and every
        // block that cannot beat the K-th is left unread. Order does not affect exactness:
        // each candidate is validated against the components above its own.
        let mut sources: Vec<Source> = Vec::new();
        for (id, files) in &tables {
            // The last block of the previous file of the level, if that file was opened.
            let mut previous_file: Option<Option<(u64, usize)>> = None;
            let mut previous_meta: Option<Arc<FileMetaData>> = None;
            let mut components_counted = false;
            for file in files {
                let predecessor = previous_file.unwrap_or(None);
                let first_of_level = previous_file.is_none();
                previous_file = Some(None);
                let previous_file_meta = previous_meta.replace(Arc::clone(file));
                if file.seq_min > self.view.sequence() || self.cannot_enter(file.seq_max) {
                    self.request.stats.tables_skipped += 1;
                    continue;
                }
                if !self.table_may_match(file)? {
                    self.request.stats.tables_skipped += 1;
                    continue;
                }
                let table = self.view.table(file)?;
                let count = table.block_count();
                if count > 0 {
                    previous_file = Some(Some((file.number, count - 1)));
                }
                if !components_counted {
                    self.request.stats.components_read += 1;
                    components_counted = true;
                }
                let order = self
                    .request
                    .embedded
                    .block_order(file.number, || Self::build_block_order(&table))?;
                let before_first = if first_of_level {
                    None
                } else {
                    // `(u64::MAX, _)`: the previous file was skipped unopened.
                    Some(predecessor.unwrap_or((u64::MAX, usize::MAX)))
                };
                sources.push(Source {
                    component: *id,
                    table,
                    before_first,
                    previous_file: previous_file_meta,
                    order,
                    next: 0,
                });
            }
        }
        // A k-way merge of the tables' block orders.
        let mut heap: std::collections::BinaryHeap<(SeqNo, Reverse<usize>)> = sources
            .iter()
            .enumerate()
            .filter_map(|(i, source)| source.order.newest_first.first().map(|b| (b.0, Reverse(i))))
            .collect();
        while let Some((seq_max, Reverse(i))) = heap.pop() {
            if self.cannot_enter(seq_max) {
                let unread: usize = sources
                    .iter()
                    .map(|s| s.order.newest_first.len() - s.next)
                    .sum();
                self.request.stats.blocks_skipped += unread as u64 + 1;
                break;
            }
            let source = &mut sources[i];
            let ordinal = source.order.newest_first[source.next].1 as usize;
            source.next += 1;
            if let Some(next) = source.order.newest_first.get(source.next) {
                heap.push((next.0, Reverse(i)));
            }
            let (component, table) = (source.component, Arc::clone(&source.table));
            if !self.block_may_match(&table, ordinal)? {
                self.request.stats.blocks_skipped += 1;
                continue;
            }
            // The block before this one in its component (none: first block of an L0 file or
            // of a level).
            let source = &sources[i];
            let predecessor = if ordinal > 0 {
                Some(Predecessor {
                    place: (table.file_number(), ordinal - 1),
                    last_user_key_bound: table
                        .block_separator(ordinal - 1)
                        .and_then(parse_internal_key)
                        .map(|separator| separator.user_key),
                })
            } else {
                source.before_first.map(|place| Predecessor {
                    place,
                    last_user_key_bound: source
                        .previous_file
                        .as_deref()
                        .map(FileMetaData::largest_user_key),
                })
            };
            self.scan_block(component, &table, ordinal, predecessor)?;
        }
        Ok(())
    }

    /// Memtable candidates from the map, newest first. Their live version is in a memtable,
    /// so the point read that fetches the document is a memory read.
    fn take_map_candidates(&mut self, mut candidates: Vec<(SeqNo, Vec<u8>)>) -> Result<()> {
        candidates.sort_by_key(|(seq, _)| Reverse(*seq));
        for (seq, pk) in candidates {
            self.request.stats.candidates_examined += 1;
            if !self.request.top.would_accept(seq) {
                break;
            }
            if self.emitted.contains(&pk) {
                continue;
            }
            self.request.stats.lite_validations += 1;
            let live = self.request.engine.get_with(
                &self.request.collection.primary,
                &pk,
                self.request.read,
            )?;
            match live {
                Some(entry) if entry.seq == seq => {
                    let envelope = EnvelopeRef::decode(&entry.value).map_err(|e| {
                        crate::kind::collection::corrupt_document(
                            &self.request.collection.record.name,
                            &pk,
                            &e,
                        )
                    })?;
                    let value = self.request.index.encoded_value(&envelope, seq);
                    if value.as_deref().is_some_and(|v| self.in_range(v)) {
                        let doc = envelope.doc().to_vec();
                        self.accept(pk, seq, doc);
                    } else {
                        self.request.stats.stale_entries += 1;
                    }
                }
                _ => self.request.stats.stale_entries += 1,
            }
        }
        Ok(())
    }

    fn accept(&mut self, pk: Vec<u8>, seq: SeqNo, doc: Vec<u8>) {
        self.emitted.insert(pk.clone());
        self.request.top.push(Hit { pk, seq, doc });
    }

    /// A point read of the live version: is `seq` it?
    fn is_live(&mut self, pk: &[u8], seq: SeqNo) -> Result<bool> {
        self.request.stats.validations += 1;
        Ok(self
            .request
            .engine
            .get_with(&self.request.collection.primary, pk, self.request.read)?
            .is_some_and(|entry| entry.seq == seq))
    }

    /// Decides whether the version `seq` of `pk`, found in `component` with no newer version
    /// before it in its block, is live.
    fn validate(
        &mut self,
        pk: &[u8],
        seq: SeqNo,
        component: ComponentId,
        before: Before,
    ) -> Result<bool> {
        if before == Before::Newer {
            return Ok(false);
        }
        match self.view.newer_version_exists_above(pk, seq, component)? {
            NewerVersion::Yes => {
                self.request.stats.lite_validations += 1;
                Ok(false)
            }
            NewerVersion::No if before == Before::Clean => {
                self.request.stats.lite_validations += 1;
                Ok(true)
            }
            NewerVersion::No | NewerVersion::Maybe => self.is_live(pk, seq),
        }
    }

    /// The memtable fallback: every visible entry, newest version of a key first.
    fn scan_memtable(&mut self, id: ComponentId) -> Result<()> {
        let mut iter = self.view.iter(id)?;
        iter.seek_to_first()?;
        let mut previous: Option<Vec<u8>> = None;
        while iter.valid() {
            let pk = iter.user_key();
            let newer_here = previous.as_deref() == Some(pk);
            if !newer_here && iter.kind() == ValueKind::Put {
                let seq = iter.seq();
                let envelope = EnvelopeRef::decode(iter.value()).map_err(|e| {
                    crate::kind::collection::corrupt_document(
                        &self.request.collection.record.name,
                        pk,
                        &e,
                    )
                })?;
                let matches = self
                    .request
                    .index
                    .encoded_value(&envelope, seq)
                    .is_some_and(|v| self.in_range(&v));
                if matches {
                    self.request.stats.candidates_examined += 1;
                    if self.request.top.would_accept(seq) && !self.emitted.contains(pk) {
                        if self.validate(pk, seq, id, Before::Clean)? {
                            let doc = envelope.doc().to_vec();
                            self.accept(pk.to_vec(), seq, doc);
                        } else {
                            self.request.stats.stale_entries += 1;
                        }
                    }
                }
            }
            if !newer_here {
                previous = Some(pk.to_vec());
            }
            iter.next()?;
        }
        Ok(())
    }

    fn table_path(&self, file: &FileMetaData) -> std::path::PathBuf {
        self.request
            .engine
            .path()
            .join(sift_lsm::extension::table_file_name(file.number))
    }

    /// The table zone map (from the manifest): may the table hold a value in the range?
    fn table_may_match(&self, file: &FileMetaData) -> Result<bool> {
        let Some(bytes) = file.properties().get(COLLECTOR_NAME) else {
            return Ok(true);
        };
        let (_, record) =
            find_attr(bytes, false, self.request.embedded.attr.attr_id).map_err(|e| {
                corruption(
                    &self.table_path(file),
                    0,
                    "table zone map (manifest copy of the table property)",
                    &e,
                )
            })?;
        Ok(record.is_none_or(|r| r.may_match(self.request.start, self.request.end, None)))
    }

    fn block_property(table: &Table, ordinal: usize) -> Option<&[u8]> {
        table
            .block_properties(ordinal)
            .and_then(|p| p.get(COLLECTOR_NAME))
    }

    fn block_corruption(
        table: &Table,
        ordinal: usize,
        error: &PropertyCorruption,
    ) -> sift_lsm::Error {
        corruption(
            table.path(),
            table.block_handle(ordinal).map_or(0, |h| h.offset),
            &format!("block properties of data block {ordinal}"),
            error,
        )
    }

    /// The table's blocks by decreasing largest sequence number (a block whose bytes do not
    /// say counts as newest).
    fn build_block_order(table: &Table) -> Result<BlockOrder> {
        let mut newest_first = Vec::with_capacity(table.block_count());
        for ordinal in 0..table.block_count() {
            let seq_max = match Self::block_property(table, ordinal) {
                Some(bytes) => {
                    block_seq_max(bytes).map_err(|e| Self::block_corruption(table, ordinal, &e))?
                }
                None => SeqNo::MAX,
            };
            newest_first.push((seq_max, ordinal as u32));
        }
        newest_first.sort_unstable_by_key(|&(seq, ordinal)| (Reverse(seq), ordinal));
        Ok(BlockOrder { newest_first })
    }

    /// The block's zone map and bloom filter: may it hold a hit?
    fn block_may_match(&self, table: &Table, ordinal: usize) -> Result<bool> {
        let Some(bytes) = Self::block_property(table, ordinal) else {
            return Ok(true);
        };
        let (_, record) = find_attr(bytes, true, self.request.embedded.attr.attr_id)
            .map_err(|e| Self::block_corruption(table, ordinal, &e))?;
        Ok(record
            .is_none_or(|r| r.may_match(self.request.start, self.request.end, self.point_hash)))
    }

    /// Reads one data block and validates its matching versions. `predecessor`: the block
    /// before it in its component (`None`: it is the component's first block there).
    fn scan_block(
        &mut self,
        component: ComponentId,
        table: &Arc<Table>,
        ordinal: usize,
        predecessor: Option<Predecessor<'_>>,
    ) -> Result<()> {
        let entries = table.read_block_entries(ordinal, &self.context)?;
        let handle_offset = table.block_handle(ordinal).map_or(0, |h| h.offset);
        let sequence = self.view.sequence();
        let bad_entry = |message: String| {
            sift_lsm::Error::corruption(
                table.path(),
                handle_offset,
                format!("data block {ordinal}: {message}"),
            )
        };
        // What the previous block says about the block's first key (the only key whose newer
        // versions can sit in another block of the component).
        let previous_block = match predecessor {
            None => Before::Clean,
            Some(p) if self.tails.contains_key(&p.place) => Before::Clean,
            Some(_) => Before::Unknown,
        };
        let previous_bound = predecessor.and_then(|p| p.last_user_key_bound);
        let previous_tail: Option<Vec<u8>> = predecessor
            .and_then(|p| self.tails.get(&p.place))
            .filter(|(_, seq)| *seq <= sequence)
            .map(|(key, _)| key.clone());
        let mut first_key: Option<&[u8]> = None;
        let mut previous_visible: Option<&[u8]> = None;
        for (internal_key, value) in &entries {
            let parsed = parse_internal_key(internal_key)
                .ok_or_else(|| bad_entry("malformed internal key".to_string()))?;
            let pk = parsed.user_key;
            let first = *first_key.get_or_insert(pk) == pk;
            if parsed.seq > sequence {
                continue;
            }
            let newer_here = previous_visible == Some(pk);
            previous_visible = Some(pk);
            if newer_here || parsed.kind != ValueKind::Put {
                continue;
            }
            let envelope = EnvelopeRef::decode(value).map_err(|e| {
                bad_entry(format!(
                    "document {:?} has a corrupt envelope: {e}",
                    String::from_utf8_lossy(pk)
                ))
            })?;
            let matches = self
                .request
                .index
                .encoded_value(&envelope, parsed.seq)
                .is_some_and(|v| self.in_range(&v));
            if !matches {
                continue;
            }
            self.request.stats.candidates_examined += 1;
            if !self.request.top.would_accept(parsed.seq) || self.emitted.contains(pk) {
                continue;
            }
            let before = if !first {
                Before::Clean
            } else if previous_block == Before::Unknown {
                // Unread, but its index separator (or its file's largest key) may show it
                // ends below this key: then it holds no newer version, and no point read
                // (which would read this very block a second time) is needed.
                if previous_bound.is_some_and(|bound| bound < pk) {
                    Before::Clean
                } else {
                    Before::Unknown
                }
            } else if previous_tail.as_deref() == Some(pk) {
                Before::Newer
            } else {
                Before::Clean
            };
            if self.validate(pk, parsed.seq, component, before)? {
                let doc = envelope.doc().to_vec();
                self.accept(pk.to_vec(), parsed.seq, doc);
            } else {
                self.request.stats.stale_entries += 1;
            }
        }
        if let Some((internal_key, _)) = entries.last() {
            let parsed = parse_internal_key(internal_key)
                .ok_or_else(|| bad_entry("malformed internal key".to_string()))?;
            self.tails.insert(
                (table.file_number(), ordinal),
                (parsed.user_key.to_vec(), parsed.seq),
            );
        }
        Ok(())
    }
}

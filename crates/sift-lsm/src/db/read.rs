//! Reads: point gets, iterators, and level-by-level component reads (with GetLite).

use crate::db::state::{DbInner, SuperVersion, TreeInfo};
use crate::db::{ComponentId, Entry, NewerVersion};
use crate::iter::{DbIterator, MergingIterator};
use crate::iterator::InternalIterator;
use crate::key::{make_seek_key, parse_internal_key, SeqNo, TreeId, ValueKind};
use crate::options::ReadOptions;
use crate::sstable::{ReadContext, Table};
use crate::version::FileMetaData;
use crate::{Error, Result};
use std::sync::Arc;

fn read_context(options: &ReadOptions) -> ReadContext {
    ReadContext {
        fill_cache: !options.skip_cache_fill,
        stats: options.read_stats.clone(),
        block_filter: options.block_filter.clone(),
    }
}

enum Found {
    Value(Entry),
    Deleted,
    NeedsMerge,
}

fn classify(kind: ValueKind, seq: SeqNo, value: Vec<u8>) -> Found {
    match kind {
        ValueKind::Put => Found::Value(Entry { value, seq }),
        ValueKind::Delete => Found::Deleted,
        ValueKind::Merge => Found::NeedsMerge,
    }
}

impl DbInner {
    /// The sequence to read at, then the super version — in that order, so that writes a
    /// background job committed together with its version edit are never seen without it.
    fn read_view(&self, options: &ReadOptions) -> (SeqNo, Arc<SuperVersion>) {
        let seq = options
            .snapshot
            .as_ref()
            .map_or_else(|| self.latest_sequence(), crate::Snapshot::sequence);
        (seq, self.super_version.load_full())
    }

    fn tree_in(sv: &SuperVersion, tree: TreeId, name: &str) -> Result<Arc<TreeInfo>> {
        sv.trees
            .get(&tree)
            .filter(|t| &*t.name == name)
            .cloned()
            .ok_or_else(|| Error::TreeNotFound(name.to_owned()))
    }

    pub(crate) fn get(
        &self,
        tree: &crate::Tree,
        key: &[u8],
        options: &ReadOptions,
    ) -> Result<Option<Entry>> {
        self.check_open()?;
        let (seq, sv) = self.read_view(options);
        self.get_in_view(&sv, tree, key, seq, options)
    }

    /// `get` at an explicit sequence number (the caller answers for the versions it needs).
    pub(crate) fn get_at(
        &self,
        tree: &crate::Tree,
        key: &[u8],
        seq: SeqNo,
        options: &ReadOptions,
    ) -> Result<Option<Entry>> {
        self.check_open()?;
        let sv = self.super_version.load_full();
        self.get_in_view(&sv, tree, key, seq, options)
    }

    fn get_in_view(
        &self,
        sv: &Arc<SuperVersion>,
        tree: &crate::Tree,
        key: &[u8],
        seq: SeqNo,
        options: &ReadOptions,
    ) -> Result<Option<Entry>> {
        Self::tree_in(sv, tree.id(), tree.name())?;
        match self.get_in(sv, tree.id(), key, seq, options)? {
            Found::Value(e) => Ok(Some(e)),
            Found::Deleted => Ok(None),
            Found::NeedsMerge => self.get_by_iterator(sv, tree, key, seq, options),
        }
    }

    fn get_in(
        &self,
        sv: &SuperVersion,
        tree: TreeId,
        key: &[u8],
        seq: SeqNo,
        options: &ReadOptions,
    ) -> Result<Found> {
        for mem in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            if let Some(e) = mem.get(tree, key, seq) {
                return Ok(classify(e.kind, e.seq, e.value));
            }
        }
        let Some(tv) = sv.version.tree(tree) else {
            return Ok(Found::Deleted);
        };
        let context = ReadContext {
            block_filter: None,
            ..read_context(options)
        };
        let seek = make_seek_key(key, seq);
        let from_table = |file: &Arc<FileMetaData>| -> Result<Option<Found>> {
            let table = self.table(file)?;
            match table.get(&seek, &context)? {
                Some((ikey, value)) => {
                    let parsed = parse_internal_key(&ikey).ok_or_else(|| {
                        Error::corruption(
                            table.path(),
                            0,
                            "table returned a malformed internal key",
                        )
                    })?;
                    Ok(Some(classify(parsed.kind, parsed.seq, value)))
                }
                None => Ok(None),
            }
        };
        let mut charge = SeekCharge::default();
        for file in tv.levels.first().into_iter().flatten() {
            if file.seq_min > seq || !file.covers_user_key(key) {
                continue;
            }
            charge.consult(self, file);
            if let Some(found) = from_table(file)? {
                return Ok(found);
            }
        }
        for level in 1..tv.levels.len() {
            if let Some(file) = tv.file_for_key(level, key) {
                if file.seq_min > seq {
                    continue;
                }
                charge.consult(self, file);
                if let Some(found) = from_table(file)? {
                    return Ok(found);
                }
            }
        }
        Ok(Found::Deleted)
    }

    /// The slow path for keys with merge operands: a bounded iterator folds them.
    fn get_by_iterator(
        &self,
        sv: &Arc<SuperVersion>,
        tree: &crate::Tree,
        key: &[u8],
        seq: SeqNo,
        options: &ReadOptions,
    ) -> Result<Option<Entry>> {
        let mut upper = key.to_vec();
        upper.push(0);
        let options = ReadOptions {
            lower_bound: Some(key.to_vec()),
            upper_bound: Some(upper),
            block_filter: None,
            ..options.clone()
        };
        let mut iter = self.iterator_at(Arc::clone(sv), tree, seq, &options)?;
        iter.seek(key)?;
        if iter.valid() && iter.key() == key {
            return Ok(Some(Entry {
                value: iter.value().to_vec(),
                seq: iter.seq(),
            }));
        }
        Ok(None)
    }

    pub(crate) fn iterator(&self, tree: &crate::Tree, options: &ReadOptions) -> Result<DbIterator> {
        self.check_open()?;
        let (seq, sv) = self.read_view(options);
        self.iterator_at(sv, tree, seq, options)
    }

    fn iterator_at(
        &self,
        sv: Arc<SuperVersion>,
        tree: &crate::Tree,
        seq: SeqNo,
        options: &ReadOptions,
    ) -> Result<DbIterator> {
        let info = Self::tree_in(&sv, tree.id(), tree.name())?;
        let context = read_context(options);
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for mem in std::iter::once(&sv.mem).chain(sv.imms.iter()) {
            children.push(Box::new(mem.iter(tree.id())));
        }
        if let Some(tv) = sv.version.tree(tree.id()) {
            let lower = options.lower_bound.as_deref();
            let upper = options.upper_bound.as_deref();
            for file in tv.levels.first().into_iter().flatten() {
                if file.seq_min > seq || !overlaps_bounds(file, lower, upper) {
                    continue;
                }
                if let Some(filter) = &options.block_filter {
                    if !filter.table_may_match(&file.properties()) {
                        if let Some(stats) = &options.read_stats {
                            stats
                                .tables_skipped
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        continue;
                    }
                }
                children.push(Box::new(self.table(file)?.iter(context.clone())));
            }
            for files in tv.levels.iter().skip(1) {
                let files: Vec<_> = files
                    .iter()
                    .filter(|f| overlaps_bounds(f, lower, upper))
                    .cloned()
                    .collect();
                if !files.is_empty() {
                    children.push(Box::new(self.level_iterator(files, &context)));
                }
            }
        }
        Ok(DbIterator::new(
            Box::new(MergingIterator::new(children)),
            seq,
            info.options.merge_operator.clone(),
            Arc::clone(&info.name),
            options.lower_bound.clone(),
            options.upper_bound.clone(),
            Box::new(sv),
        ))
    }

    pub(crate) fn components(
        self: &Arc<Self>,
        tree: &crate::Tree,
        options: &ReadOptions,
    ) -> Result<ComponentView> {
        self.check_open()?;
        let (seq, sv) = self.read_view(options);
        let info = Self::tree_in(&sv, tree.id(), tree.name())?;
        Ok(ComponentView {
            inner: Arc::clone(self),
            sv,
            tree: info,
            sequence: seq,
            options: options.clone(),
        })
    }
}

/// Seek compaction's bookkeeping for one point read (LevelDB's rule): when the read consults a
/// second table file, the first one it consulted (in vain) is charged, once per read.
#[derive(Default)]
struct SeekCharge<'a> {
    first: Option<&'a Arc<FileMetaData>>,
    charged: bool,
}

impl<'a> SeekCharge<'a> {
    fn consult(&mut self, inner: &DbInner, file: &'a Arc<FileMetaData>) {
        match self.first {
            None => self.first = Some(file),
            Some(first) if !self.charged => {
                self.charged = true;
                if inner.options.seek_compaction && first.charge_seek() {
                    inner.seek_allowance_spent();
                }
            }
            Some(_) => {}
        }
    }
}

fn overlaps_bounds(
    file: &FileMetaData,
    lower: Option<&[u8]>,
    upper_exclusive: Option<&[u8]>,
) -> bool {
    let below = upper_exclusive.is_some_and(|u| file.smallest_user_key() >= u);
    let above = lower.is_some_and(|l| file.largest_user_key() < l);
    !below && !above
}

/// A consistent view of one tree, component by component (memtables, each L0 file newest
/// first, then L1, L2, ...), at one sequence number. This is what LevelDB++-style secondary
/// lookups walk: they stop after the first component that yields enough results.
pub struct ComponentView {
    inner: Arc<DbInner>,
    sv: Arc<SuperVersion>,
    tree: Arc<TreeInfo>,
    sequence: SeqNo,
    options: ReadOptions,
}

impl ComponentView {
    /// Reads see writes with sequence numbers up to this.
    pub fn sequence(&self) -> SeqNo {
        self.sequence
    }

    /// The number of the last version change told to the version listeners before this view's
    /// files were installed ([`crate::extension::VersionChange::files_epoch`]; 0 before any).
    /// A listener that has applied change `e` holds state for exactly this view's files when
    /// this is `e`; when this is larger, the listeners are being told of the newer change.
    pub fn files_epoch(&self) -> u64 {
        self.sv.files_epoch
    }

    /// The components, newest first. Empty sorted levels are left out.
    pub fn ids(&self) -> Vec<ComponentId> {
        let mut ids = vec![ComponentId::Memtable];
        ids.extend((0..self.sv.imms.len()).map(ComponentId::ImmutableMemtable));
        if let Some(tv) = self.sv.version.tree(self.tree.id) {
            ids.extend(
                tv.levels
                    .first()
                    .into_iter()
                    .flatten()
                    .map(|f| ComponentId::Level0File(f.number)),
            );
            ids.extend(
                tv.levels
                    .iter()
                    .enumerate()
                    .skip(1)
                    .filter(|(_, files)| !files.is_empty())
                    .map(|(level, _)| ComponentId::Level(level)),
            );
        }
        ids
    }

    /// The files of a level (L0: newest first).
    pub fn files(&self, level: usize) -> Vec<Arc<FileMetaData>> {
        self.sv
            .version
            .tree(self.tree.id)
            .and_then(|tv| tv.levels.get(level).cloned())
            .unwrap_or_default()
    }

    /// The opened table of a file in this view.
    pub fn table(&self, file: &Arc<FileMetaData>) -> Result<Arc<Table>> {
        self.inner.table(file)
    }

    /// The meta block `name` written by `collector` into a live file of the view, with the
    /// file's path and the block's handle; read without opening the table if it is not open
    /// yet (see `TableOpener::meta_block`). `None`: the table has no such block.
    pub fn table_meta_block(
        &self,
        file: &Arc<FileMetaData>,
        collector: &str,
        name: &str,
        ctx: &ReadContext,
    ) -> Result<Option<crate::sstable::LiveMetaBlock>> {
        self.inner.tables.meta_block(file, collector, name, ctx)
    }

    /// Every entry of one component (all versions, tombstones included) with sequence numbers
    /// up to the view's, in internal-key order. Honours the read options' block filter.
    pub fn iter(&self, id: ComponentId) -> Result<ComponentIterator> {
        let context = read_context(&self.options);
        let inner: Box<dyn InternalIterator> = match id {
            ComponentId::Memtable => Box::new(self.sv.mem.iter(self.tree.id)),
            ComponentId::ImmutableMemtable(i) => {
                let mem = self.sv.imms.get(i).ok_or_else(|| {
                    Error::InvalidArgument(format!("no immutable memtable {i} in this view"))
                })?;
                Box::new(mem.iter(self.tree.id))
            }
            ComponentId::Level0File(number) => {
                let file = self
                    .files(0)
                    .into_iter()
                    .find(|f| f.number == number)
                    .ok_or_else(|| {
                        Error::InvalidArgument(format!("no L0 file {number} in this view"))
                    })?;
                if self.skips_table(&file) {
                    Box::new(crate::iterator::EmptyIterator)
                } else {
                    Box::new(self.inner.table(&file)?.iter(context))
                }
            }
            ComponentId::Level(level) => {
                let files = self.files(level);
                Box::new(self.inner.level_iterator(files, &context))
            }
        };
        Ok(ComponentIterator {
            inner,
            sequence: self.sequence,
            started: false,
        })
    }

    /// Whether the block filter rules the whole table out; counts the skip, as scans do.
    fn skips_table(&self, file: &FileMetaData) -> bool {
        let skip = self
            .options
            .block_filter
            .as_ref()
            .is_some_and(|f| !f.table_may_match(&file.properties()));
        if let (true, Some(stats)) = (skip, &self.options.read_stats) {
            stats
                .tables_skipped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        skip
    }

    /// GetLite: whether a version of `user_key` newer than `seq` (and visible in this view)
    /// exists in a component above `component`, answered from memory only: memtables are
    /// searched exactly; tables are checked by sequence range, key range and bloom filter, so
    /// for them the answer is at most `Maybe`.
    pub fn newer_version_exists_above(
        &self,
        user_key: &[u8],
        seq: SeqNo,
        component: ComponentId,
    ) -> Result<NewerVersion> {
        let tree = self.tree.id;
        let mut answer = NewerVersion::No;
        let mems = std::iter::once((ComponentId::Memtable, &self.sv.mem)).chain(
            self.sv
                .imms
                .iter()
                .enumerate()
                .map(|(i, m)| (ComponentId::ImmutableMemtable(i), m)),
        );
        for (id, mem) in mems {
            if id >= component {
                return Ok(answer);
            }
            if let Some(e) = mem.get(tree, user_key, self.sequence) {
                if e.seq > seq {
                    return Ok(NewerVersion::Yes);
                }
            }
        }
        let Some(tv) = self.sv.version.tree(tree) else {
            return Ok(answer);
        };
        let mut check = |file: &Arc<FileMetaData>| -> Result<()> {
            if file.seq_max <= seq
                || file.seq_min > self.sequence
                || !file.covers_user_key(user_key)
            {
                return Ok(());
            }
            if self.inner.table(file)?.may_contain_user_key(user_key) {
                answer = NewerVersion::Maybe;
            }
            Ok(())
        };
        for file in tv.levels.first().into_iter().flatten() {
            if ComponentId::Level0File(file.number) == component {
                return Ok(answer);
            }
            check(file)?;
        }
        for level in 1..tv.levels.len() {
            if ComponentId::Level(level) >= component {
                break;
            }
            if let Some(file) = tv.file_for_key(level, user_key) {
                check(file)?;
            }
        }
        Ok(answer)
    }
}

/// Raw entries of one component at a view's sequence number (forward only).
pub struct ComponentIterator {
    inner: Box<dyn InternalIterator>,
    sequence: SeqNo,
    started: bool,
}

impl ComponentIterator {
    fn skip_invisible(&mut self) -> Result<()> {
        while self.inner.valid() {
            match parse_internal_key(self.inner.key()) {
                Some(p) if p.seq <= self.sequence => return Ok(()),
                Some(_) => self.inner.next()?,
                None => {
                    return Err(Error::corruption(
                        "component",
                        0,
                        "malformed internal key in component",
                    ))
                }
            }
        }
        Ok(())
    }
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.started = true;
        self.inner.seek_to_first()?;
        self.skip_invisible()
    }
    /// Positions at the first entry with user key `>= user_key`.
    pub fn seek(&mut self, user_key: &[u8]) -> Result<()> {
        self.started = true;
        self.inner
            .seek(&make_seek_key(user_key, crate::key::SEQ_MAX))?;
        self.skip_invisible()
    }
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        if !self.started {
            return self.seek_to_first();
        }
        self.inner.next()?;
        self.skip_invisible()
    }
    pub fn valid(&self) -> bool {
        self.started && self.inner.valid()
    }
    pub fn user_key(&self) -> &[u8] {
        crate::key::user_key(self.inner.key())
    }
    pub fn seq(&self) -> SeqNo {
        parse_internal_key(self.inner.key()).map_or(0, |p| p.seq)
    }
    pub fn kind(&self) -> ValueKind {
        parse_internal_key(self.inner.key()).map_or(ValueKind::Delete, |p| p.kind)
    }
    pub fn value(&self) -> &[u8] {
        self.inner.value()
    }
}

//! Lazy LOOKUP of one value (Algorithm 3) without a cost per posting it cannot use: each
//! component's fragments are copied once into an arena and decoded in place (pks borrowed),
//! and a component that holds one list (newest first, as the format requires) is examined from
//! its head only until the top K can no longer accept a posting.
//!
//! The lazy RANGE (`Query::run_lazy`) reads its components the same way, through
//! [`Query::collect_fragments`] and the general path [`Query::take_lists`].

use crate::error::{IndexError, Result};
use crate::kind::query::Query;
use crate::postings::{PostingIter, PostingRef};
use sift_lsm::extension::ComponentView;
use sift_lsm::{ComponentId, SeqNo, ValueKind};
use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};

/// Removes met so far, by sequence number: looked up with a borrowed pk (no allocation).
#[derive(Default)]
pub(crate) struct RemovedPostings {
    by_seq: HashMap<SeqNo, Vec<Vec<u8>>>,
}

impl RemovedPostings {
    fn insert(&mut self, pk: &[u8], seq: SeqNo) {
        let pks = self.by_seq.entry(seq).or_default();
        if !pks.iter().any(|known| known.as_slice() == pk) {
            pks.push(pk.to_vec());
        }
    }

    fn contains(&self, pk: &[u8], seq: SeqNo) -> bool {
        self.by_seq
            .get(&seq)
            .is_some_and(|pks| pks.iter().any(|known| known.as_slice() == pk))
    }
}

/// One fragment copied into the component arena: the index (in `keys`) of the key it is filed
/// under and its byte span.
#[derive(Clone, Copy)]
pub(crate) struct ListSpan {
    key: usize,
    start: usize,
    end: usize,
}

/// The fragments of one component in the query's range, each copied once into an arena (a
/// key once, however many fragments it has): refilled by [`Query::collect_fragments`] for
/// each component, its buffers reused.
#[derive(Default)]
pub(crate) struct ComponentFragments {
    arena: Vec<u8>,
    keys: Vec<Vec<u8>>,
    lists: Vec<ListSpan>,
}

impl Query<'_> {
    /// Lazy LOOKUP: component by component, newest first, stopping after the first component
    /// at which K valid hits are known. Hits are exactly those of the general lazy path: a
    /// posting is validated iff no remove met so far cancels it and the top K would accept it.
    pub(crate) fn run_lazy_point(&mut self) -> Result<()> {
        let tree = self.index.stand_alone_tree()?;
        let view = self.engine.components(tree, &self.read)?;
        let mut removed = RemovedPostings::default();
        // Keys whose base (a full list or a delete) was met: nothing below them counts.
        let mut based: HashSet<Vec<u8>> = HashSet::new();
        let mut fragments = ComponentFragments::default();
        for id in view.ids() {
            self.stats.components_read += 1;
            self.collect_fragments(&view, id, &mut based, &mut fragments)?;
            if let [list] = fragments.lists[..] {
                self.take_single_list(id, &fragments.arena, &fragments.keys, list, &mut removed)?;
            } else {
                self.take_lists(id, &fragments, &mut removed)?;
            }
            if self.top.is_full() {
                break;
            }
        }
        Ok(())
    }

    /// Copies the fragments of component `id` in the query's range into `fragments`, except
    /// those of keys in `based` (a newer component holds their base), and adds to `based` the
    /// keys whose base (a full list or a delete) this component holds.
    pub(crate) fn collect_fragments(
        &self,
        view: &ComponentView,
        id: ComponentId,
        based: &mut HashSet<Vec<u8>>,
        fragments: &mut ComponentFragments,
    ) -> Result<()> {
        let ComponentFragments { arena, keys, lists } = fragments;
        arena.clear();
        keys.clear();
        lists.clear();
        let mut iter = view.iter(id)?;
        iter.seek(&self.start)?;
        while iter.valid() && self.in_range(iter.user_key()) {
            let key = iter.user_key();
            if !based.contains(key) {
                let kind = iter.kind();
                if kind != ValueKind::Delete {
                    if keys.last().is_none_or(|last| last.as_slice() != key) {
                        keys.push(key.to_vec());
                    }
                    let start = arena.len();
                    arena.extend_from_slice(iter.value());
                    lists.push(ListSpan {
                        key: keys.len() - 1,
                        start,
                        end: arena.len(),
                    });
                }
                if kind != ValueKind::Merge {
                    based.insert(key.to_vec());
                }
            }
            iter.next()?;
        }
        Ok(())
    }

    /// A malformed fragment: the error names the component it was read from (memtable, L0
    /// file number or level) and the offset inside the fragment.
    fn corrupt_fragment(&self, component: ComponentId, error: &IndexError) -> IndexError {
        self.corrupt(&format!("posting fragment in {component:?}"), error)
    }

    /// The only list of a component, streamed from its head.
    ///
    /// The format (`docs/format/index-encodings.md`, "Posting lists and fragments") stores
    /// every list newest first, and every writer keeps it so: the merge operator sorts its
    /// output, a back-fill sorts each list, a PUT's fragment holds one posting. The stream
    /// relies on that and checks it on the part it reads: a sequence number larger than the
    /// one before it is reported as corruption, never answered. The unread rest is not
    /// checked — that is what lets a top-K stop early: verifying the whole order first costs a
    /// decode of the whole list, which for a heavy value in a fully compacted tree was most of
    /// the LOOKUP (p90 about 2× higher at 1,000,000 tweets).
    ///
    /// Stopping: once the top K cannot accept a posting's seq, it cannot accept any later one
    /// (later seqs are no larger and the K-th newest hit only gets newer), so the rest of the
    /// list is not examined. A remove names exactly the seq of the add it cancels, so in a
    /// newest-first list it sits in the run of that seq: removes listed before the stop point
    /// are in `removed`; a remove listed after it names a seq older than the stopping
    /// posting's, so the add it cancels could not enter the top K either — and a stop only
    /// happens with the top K full, after which the LOOKUP reads no lower component at all.
    ///
    /// Postings of one seq are gathered before any is validated, because a list puts the
    /// removes of a seq after its adds.
    fn take_single_list(
        &mut self,
        component: ComponentId,
        arena: &[u8],
        keys: &[Vec<u8>],
        list: ListSpan,
        removed: &mut RemovedPostings,
    ) -> Result<()> {
        let bytes = &arena[list.start..list.end];
        let value = keys[list.key].as_slice();
        let mut postings =
            PostingIter::new(bytes).map_err(|e| self.corrupt_fragment(component, &e))?;
        let mut group: Vec<PostingRef<'_>> = Vec::new();
        let mut previous_seq = SeqNo::MAX;
        loop {
            let next = postings
                .next()
                .transpose()
                .map_err(|e| self.corrupt_fragment(component, &e))?;
            if let Some(posting) = &next {
                if posting.seq > previous_seq {
                    let at = postings.offset();
                    return Err(self.corrupt_fragment(
                        component,
                        &IndexError::corrupt(
                            at,
                            format!(
                                "list not newest first: seq {} after seq {previous_seq}",
                                posting.seq
                            ),
                        ),
                    ));
                }
                previous_seq = posting.seq;
            }
            let group_seq = group.first().map(|posting| posting.seq);
            if group_seq.is_some() && next.is_none_or(|posting| Some(posting.seq) != group_seq) {
                for posting in group.iter().filter(|posting| posting.remove) {
                    removed.insert(posting.pk, posting.seq);
                }
                for posting in group.iter().filter(|posting| !posting.remove) {
                    if removed.contains(posting.pk, posting.seq) {
                        continue;
                    }
                    self.stats.candidates_examined += 1;
                    if !self.top.would_accept(posting.seq) {
                        return Ok(());
                    }
                    self.validate(posting.pk, value, Some(posting.seq))?;
                }
                group.clear();
            }
            match next {
                Some(posting) => group.push(posting),
                None => return Ok(()),
            }
        }
    }

    /// The general path: every fragment of the component decoded (removes first recorded),
    /// adds sorted newest first, validated until the top K cannot accept one.
    pub(crate) fn take_lists(
        &mut self,
        component: ComponentId,
        fragments: &ComponentFragments,
        removed: &mut RemovedPostings,
    ) -> Result<()> {
        let ComponentFragments { arena, keys, lists } = fragments;
        let mut adds: Vec<(SeqNo, &[u8], usize)> = Vec::new();
        for list in lists {
            let postings = PostingIter::new(&arena[list.start..list.end])
                .map_err(|e| self.corrupt_fragment(component, &e))?;
            for posting in postings {
                let posting = posting.map_err(|e| self.corrupt_fragment(component, &e))?;
                if posting.remove {
                    removed.insert(posting.pk, posting.seq);
                } else {
                    adds.push((posting.seq, posting.pk, list.key));
                }
            }
        }
        // Stable: postings of equal seq keep their stored order.
        adds.sort_by_key(|(seq, _, _)| Reverse(*seq));
        for (seq, pk, key) in adds {
            // A posting cancelled by a remove fragment is not a candidate.
            if removed.contains(pk, seq) {
                continue;
            }
            self.stats.candidates_examined += 1;
            // Sorted newest first and the K-th hit only gets newer: nothing later fits.
            if !self.top.would_accept(seq) {
                break;
            }
            self.validate(pk, &keys[key], Some(seq))?;
        }
        Ok(())
    }
}

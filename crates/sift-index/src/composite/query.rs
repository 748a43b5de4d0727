//! Composite LOOKUP and RANGE (LevelDB++ Algorithms 4 and 7) and WITHIN over Z-order keys.

use super::bounded::ComponentScratch;
use crate::encoding::{decode_pk, decode_value};
use crate::error::Result;
use crate::kind::query::Query;
use crate::kind::within::{key_bounds, Candidate, Within};
use crate::value::{AttrType, AttrValue};
use sift_lsm::{ComponentId, ReadOptions, SeqNo};
use std::cmp::Reverse;

impl Query<'_> {
    /// Composite (Algorithms 4 and 7): one scan of the key range over all components (the
    /// merged iterator gives each `value ‖ pk` key once, newest version). Keys come in pk
    /// order, not recency order, so the scan first collects every candidate with its entry's
    /// sequence number (an index read, no primary read), then validates candidates newest
    /// entry first and stops at the first one that cannot enter the top K (an entry is
    /// written at or after the version it names, so its sequence number bounds the version's:
    /// asynchronous indexes insert theirs at the version's own number, see `async_index`).
    /// LOOKUPs (one value) walk components instead: [`Query::run_composite_point`].
    pub(crate) fn run_composite(&mut self) -> Result<()> {
        if self.point {
            return self.run_composite_point();
        }
        let tree = self.index.stand_alone_tree()?;
        let options = ReadOptions {
            lower_bound: Some(self.start.clone()),
            upper_bound: self.end.clone(),
            ..self.read.clone()
        };
        let attr_type = self.index.record.attr_type;
        let mut iter = self.engine.iter(tree, options)?;
        iter.seek(&self.start.clone())?;
        // Keys are copied into one arena, (entry seq, key start, value end, key end) per
        // candidate: no allocation per entry, and only validated candidates decode their pk.
        let mut arena: Vec<u8> = Vec::new();
        let mut candidates: Vec<(SeqNo, usize, usize, usize)> = Vec::new();
        while iter.valid() {
            self.stats.candidates_examined += 1;
            let key = iter.key();
            let (_, value_bytes) =
                decode_value(key, attr_type).map_err(|e| self.corrupt("composite key", &e))?;
            let start = arena.len();
            arena.extend_from_slice(key);
            candidates.push((iter.seq(), start, start + value_bytes, arena.len()));
            iter.next()?;
        }
        candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
        for (entry_seq, start, value_end, end) in candidates {
            if !self.top.would_accept(entry_seq) {
                break;
            }
            let (pk, _) =
                decode_pk(&arena[value_end..end]).map_err(|e| self.corrupt("composite key", &e))?;
            self.validate(&pk, &arena[start..value_end], None)?;
        }
        Ok(())
    }

    /// Composite LOOKUP, component by component, newest first (as Algorithm 3 walks a lazy
    /// index): each component's keys of the value are collected and validated newest entry
    /// first, and the walk stops once the K-th hit is at least as new as every component
    /// left (a hit's live version is no newer than its newest index entry). Most lookups find
    /// their K newest hits in the small upper components and never scan the large bottom
    /// level. A key met in a newer component (put or delete) shadows its entries below, so
    /// each key — each pk, for one value — is validated at most once, as in a merged scan.
    /// Inside a table component, blocks are read newest first by their sequence bound and the
    /// reading stops as early (`bounded.rs`); memtables are scanned whole.
    pub(crate) fn run_composite_point(&mut self) -> Result<()> {
        let tree = self.index.stand_alone_tree()?;
        let view = self.engine.components(tree, &self.read)?;
        let ids = view.ids();
        // Keys of the components already read (each component's in their own arena), sorted.
        let mut arenas: Vec<Vec<u8>> = Vec::new();
        let mut seen: Vec<(usize, usize, usize)> = Vec::new();
        // Sized for a typical value's entries, so collecting them rarely reallocates.
        let mut keys: Vec<(usize, usize)> = Vec::with_capacity(256);
        let mut candidates: Vec<(SeqNo, usize, usize, usize)> = Vec::with_capacity(256);
        let mut table_buffers = ComponentScratch::default();
        for (position, id) in ids.iter().enumerate() {
            self.stats.components_read += 1;
            // (entry seq, key start, value end, key end) per candidate, keys in `arena`.
            let mut arena: Vec<u8> = Vec::with_capacity(8 << 10);
            keys.clear();
            candidates.clear();
            if matches!(id, ComponentId::Level0File(_) | ComponentId::Level(_)) {
                // Tables: blocks newest first by their sequence bound (`bounded.rs`).
                self.composite_table_component(
                    &view,
                    *id,
                    (&arenas, &seen),
                    &mut arena,
                    &mut keys,
                    &mut table_buffers,
                )?;
            } else {
                let mut iter = view.iter(*id)?;
                iter.seek(&self.start)?;
                while iter.valid() && self.in_range(iter.user_key()) {
                    let key = iter.user_key();
                    // A key's versions come newest first: the first visible one is the key's.
                    if keys.last().is_some_and(|&(s, e)| &arena[s..e] == key) {
                        iter.next()?;
                        continue;
                    }
                    let candidate = self.take_point_key(
                        key,
                        iter.seq(),
                        iter.kind(),
                        (&arenas, &seen),
                        &mut arena,
                        &mut keys,
                    )?;
                    candidates.extend(candidate);
                    iter.next()?;
                }
                candidates.sort_unstable_by_key(|c| Reverse(c.0));
                for &(entry_seq, start, value_end, end) in &candidates {
                    if !self.top.would_accept(entry_seq) {
                        break;
                    }
                    self.validate_point_key(&arena[start..end], value_end - start)?;
                }
            }
            let rest = &ids[position + 1..];
            if rest.is_empty() {
                break;
            }
            if self.top.is_full() {
                let newest_left = self.newest_seq_in(&view, rest);
                if self.top.min_seq().is_some_and(|min| newest_left <= min) {
                    break;
                }
            }
            if !keys.is_empty() {
                let arena_index = arenas.len();
                seen.extend(keys.iter().map(|&(s, e)| (arena_index, s, e)));
                arenas.push(arena);
                seen.sort_unstable_by(|&(a, s, e), &(b, t, f)| {
                    arenas[a][s..e].cmp(&arenas[b][t..f])
                });
            }
        }
        Ok(())
    }
}

impl Within<'_> {
    /// Composite: each range of the cover is one scan of the index tree; keys whose point is
    /// outside the box are dropped without a primary read; the rest are validated newest entry
    /// first until one cannot enter the top K (an entry is written after the version it names).
    pub(crate) fn run_composite(&mut self, ranges: &[(u64, u64)]) -> Result<()> {
        let tree = self.index.stand_alone_tree()?;
        let mut candidates = Vec::new();
        for &range in ranges {
            let (start, end) = key_bounds(range);
            let options = ReadOptions {
                lower_bound: Some(start.clone()),
                upper_bound: end,
                ..self.read.clone()
            };
            let mut iter = self.engine.iter(tree, options)?;
            iter.seek(&start)?;
            while iter.valid() {
                self.stats.candidates_examined += 1;
                let key = iter.key();
                let (value, value_bytes) = decode_value(key, AttrType::Geo)
                    .map_err(|e| self.corrupt("composite key", &e))?;
                if let AttrValue::Geo { lon, lat } = value {
                    if self.geo_box.contains(lon, lat) {
                        let (pk, _) = decode_pk(&key[value_bytes..])
                            .map_err(|e| self.corrupt("composite key", &e))?;
                        candidates.push(Candidate {
                            entry_seq: iter.seq(),
                            pk,
                            value: key[..value_bytes].to_vec(),
                        });
                    }
                }
                iter.next()?;
            }
        }
        candidates.sort_unstable_by_key(|candidate| Reverse(candidate.entry_seq));
        for candidate in candidates {
            if !self.would_accept(candidate.entry_seq.saturating_sub(1)) {
                break;
            }
            self.validate(&candidate, None)?;
        }
        Ok(())
    }
}

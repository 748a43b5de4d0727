//! Applying a `VersionEdit` to the replayed manifest state, with every inconsistency reported
//! as corruption of the manifest.

use crate::version::edit::VersionEdit;
use crate::version::set::{sort_level, ManifestState};
use crate::{Error, Result};
use std::path::Path;
use std::sync::Arc;

pub fn apply_edit_to_state(
    state: &mut ManifestState,
    edit: &VersionEdit,
    levels_max: usize,
    file: &Path,
    offset: u64,
) -> Result<()> {
    let corrupt = |m: String| Error::corruption(file, offset, m);
    if let Some(n) = edit.log_number {
        state.log_number = state.log_number.max(n);
    }
    if let Some(n) = edit.next_file_number {
        state.next_file_number = state.next_file_number.max(n);
    }
    if let Some(s) = edit.last_sequence {
        state.last_sequence = state.last_sequence.max(s);
    }
    if let Some(t) = edit.next_tree_id {
        state.next_tree_id = state.next_tree_id.max(t);
    }
    for (id, name) in &edit.trees_created {
        if state.trees.values().any(|n| n == name) {
            return Err(corrupt(format!("tree {name:?} created twice")));
        }
        state.trees.insert(*id, name.clone());
        state
            .files
            .entry(*id)
            .or_insert_with(|| vec![Vec::new(); levels_max]);
        state.next_tree_id = state.next_tree_id.max(id + 1);
    }
    for (tree, level, number) in &edit.deleted_files {
        let levels = state
            .files
            .get_mut(tree)
            .ok_or_else(|| corrupt(format!("file {number} deleted from unknown tree {tree}")))?;
        let files = levels
            .get_mut(*level)
            .ok_or_else(|| corrupt(format!("file {number} deleted from level {level}")))?;
        let before = files.len();
        files.retain(|f| f.number != *number);
        if files.len() == before {
            return Err(corrupt(format!(
                "file {number} deleted from tree {tree} level {level} where it is not"
            )));
        }
    }
    let mut touched = Vec::new();
    for (tree, level, new_file) in &edit.new_files {
        if *level >= levels_max {
            return Err(corrupt(format!(
                "file {} added at level {level}, beyond the {levels_max} levels configured",
                new_file.number
            )));
        }
        let levels = state.files.get_mut(tree).ok_or_else(|| {
            corrupt(format!(
                "file {} added to unknown tree {tree}",
                new_file.number
            ))
        })?;
        levels[*level].push(Arc::new(new_file.to_meta()));
        touched.push((*tree, *level));
        state.next_file_number = state.next_file_number.max(new_file.number + 1);
    }
    for (tree, level) in touched {
        if let Some(files) = state.files.get_mut(&tree).and_then(|l| l.get_mut(level)) {
            sort_level(level, files);
        }
    }
    for (tree, level, key) in &edit.compaction_pointers {
        state
            .compaction_pointers
            .insert((*tree, *level), key.clone());
    }
    for id in &edit.trees_dropped {
        state.trees.remove(id);
        state.files.remove(id);
        state.compaction_pointers.retain(|(tree, _), _| tree != id);
    }
    Ok(())
}

//! Which data blocks of a collection's primary tree hold given document versions: the blocks
//! a perfect secondary index would read to return them. The benchmark compares the blocks a
//! query read with this count (issue 4's target for `embedded` time ranges: at most twice the
//! blocks that hold the results). Reads table index blocks and, per version, one data block,
//! outside any measurement and without filling the cache.

use sift_bench::kv::BenchError;
use sift_index::Database;
use sift_lsm::extension::InternalIterator;
use sift_lsm::extension::ReadContext;
use sift_lsm::extension::{make_seek_key, parse_internal_key};
use sift_lsm::{ComponentId, ReadOptions, SeqNo};
use std::collections::HashSet;

fn error(e: impl std::fmt::Display) -> BenchError {
    BenchError::new(format!("sift: {e}"))
}

/// The number of distinct (table file, data block) pairs holding the versions `(pk, seq)` of
/// documents of `collection`. Versions still in a memtable are in no block and not counted.
pub fn distinct_blocks(
    database: &Database,
    collection: &str,
    versions: &[(Vec<u8>, SeqNo)],
) -> Result<u64, BenchError> {
    if versions.is_empty() {
        return Ok(0);
    }
    let info = database.collection(collection).map_err(error)?;
    let engine = database.engine();
    let tree = engine
        .tree(&info.record.primary_tree_name())
        .map_err(error)?;
    let view = engine
        .components(&tree, &ReadOptions::default())
        .map_err(error)?;
    let mut files = Vec::new();
    for id in view.ids() {
        match id {
            ComponentId::Level(level) => files.extend(view.files(level)),
            ComponentId::Level0File(_) if files.is_empty() => files.extend(view.files(0)),
            _ => {}
        }
    }
    let context = ReadContext {
        fill_cache: false,
        ..ReadContext::default()
    };
    let mut blocks = HashSet::new();
    for (pk, seq) in versions {
        let seek_key = make_seek_key(pk, *seq);
        for file in &files {
            let holds_key = file.smallest_user_key() <= pk.as_slice()
                && pk.as_slice() <= file.largest_user_key()
                && (file.seq_min..=file.seq_max).contains(seq);
            if !holds_key {
                continue;
            }
            let table = view.table(file).map_err(error)?;
            let mut iter = table.iter(context.clone());
            iter.seek(&seek_key).map_err(error)?;
            if !iter.valid() {
                continue;
            }
            let found = parse_internal_key(iter.key())
                .is_some_and(|key| key.user_key == pk.as_slice() && key.seq == *seq);
            if let (true, Some(ordinal)) = (found, iter.block_ordinal()) {
                blocks.insert((file.number, ordinal));
                break;
            }
        }
    }
    Ok(blocks.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_index::{AttrType, AttrValue, DatabaseOptions, IndexKind, IndexSpec};
    use sift_workload::{TweetConfig, TweetGenerator};

    #[test]
    fn counts_the_blocks_that_hold_versions() {
        let dir = tempfile::tempdir().unwrap();
        let mut options = DatabaseOptions::default();
        options.engine.memtable_bytes_max = 256 << 10;
        let database = Database::open(dir.path(), options).unwrap();
        database.create_collection("tweets", "tweet_id").unwrap();
        database
            .create_index(
                "tweets",
                IndexSpec::new("by_time", "created_at", AttrType::Time, IndexKind::Embedded),
            )
            .unwrap();
        let mut tweets = TweetGenerator::new(TweetConfig::for_tweets(3000, 4)).unwrap();
        for _ in 0..3000 {
            database
                .put("tweets", tweets.next_tweet().json.as_bytes())
                .unwrap();
        }
        database.flush().unwrap();
        database.engine().wait_for_background_work().unwrap();
        let everything = database
            .range(
                "tweets",
                "by_time",
                &AttrValue::Time(i64::MIN),
                &AttrValue::Time(i64::MAX),
                None,
            )
            .unwrap();
        assert_eq!(everything.hits.len(), 3000);
        let versions: Vec<(Vec<u8>, SeqNo)> = everything
            .hits
            .iter()
            .map(|hit| (hit.pk.clone(), hit.seq))
            .collect();
        // Every data block of every live file holds some of the documents.
        let engine = database.engine();
        let tree = engine
            .tree(
                &database
                    .collection("tweets")
                    .unwrap()
                    .record
                    .primary_tree_name(),
            )
            .unwrap();
        let view = engine.components(&tree, &ReadOptions::default()).unwrap();
        let mut total_blocks = 0;
        for level in 0..8 {
            for file in view.files(level) {
                total_blocks += view.table(&file).unwrap().block_count() as u64;
            }
        }
        assert!(total_blocks > 100, "{total_blocks}");
        assert_eq!(
            distinct_blocks(&database, "tweets", &versions).unwrap(),
            total_blocks
        );
        assert_eq!(
            distinct_blocks(&database, "tweets", &versions[..1]).unwrap(),
            1
        );
        // A version that does not exist is in no block.
        let (pk, seq) = versions[0].clone();
        assert_eq!(
            distinct_blocks(&database, "tweets", &[(pk, seq + 1_000_000)]).unwrap(),
            0
        );
        assert_eq!(distinct_blocks(&database, "tweets", &[]).unwrap(), 0);
        database.close().unwrap();
    }
}

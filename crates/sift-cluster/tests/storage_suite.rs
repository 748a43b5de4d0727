//! openraft's own storage test suite, run against Sift's log store and state machine: the
//! library's model of what a log store and a state machine must do (log state, reads,
//! truncation, purges, votes, the initial state derived after a restart, applied state and
//! membership, snapshots built, installed and transferred between two state machines): all
//! 45 of its tests.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use openraft::errors::ErrorSource;
use openraft::impls::BoxedErrorSource;
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::StorageError;
use sift_cluster::log_store::LogStore;
use sift_cluster::state_machine::StateMachine;
use sift_cluster::TypeConfig;
use sift_index::DatabaseOptions;
use sift_lsm::{Db, Options};
use std::sync::Arc;

struct Builder;

/// A setup failure as the suite's error type.
fn setup_error(error: impl std::fmt::Display) -> StorageError<TypeConfig> {
    let io = std::io::Error::other(error.to_string());
    StorageError::read(BoxedErrorSource::from_error(&io))
}

impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for Builder {
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError<TypeConfig>> {
        let dir = tempfile::tempdir().map_err(setup_error)?;
        let log_db = Db::open(dir.path().join("log"), Options::default()).map_err(setup_error)?;
        let log_store = LogStore::open(Arc::new(log_db), 7).map_err(setup_error)?;
        let state_machine =
            StateMachine::open(&dir.path().join("data"), DatabaseOptions::default())
                .map_err(setup_error)?;
        Ok((dir, log_store, state_machine))
    }
}

type S = Suite<TypeConfig, LogStore, StateMachine, Builder, tempfile::TempDir>;

/// Runs one suite test on fresh stores.
macro_rules! suite_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (_dir, log_store, state_machine) = Builder.build().await.unwrap();
                S::$name(log_store, state_machine).await.unwrap();
            }
        )*
    };
}

suite_tests!(
    last_membership_in_log_initial,
    last_membership_in_log,
    last_membership_in_log_multi_step,
    get_membership_initial,
    get_membership_from_log_and_empty_sm,
    get_membership_from_empty_log_and_sm,
    get_membership_from_log_le_sm_last_applied,
    get_membership_from_log_gt_sm_last_applied_1,
    get_membership_from_log_gt_sm_last_applied_2,
    get_initial_state_without_init,
    get_initial_state_with_state,
    get_initial_state_last_log_lt_sm,
    get_initial_state_log_ids,
    get_initial_state_membership_from_empty_log_and_sm,
    get_initial_state_membership_from_log_insm_is_smaller,
    get_initial_state_membership_from_sm_inlog_is_smaller,
    get_initial_state_re_apply_committed,
    get_initial_state_last_log_gt_sm,
    get_initial_state_inverted_log_order,
    get_initial_state_conflict_at_same_index,
    save_vote,
    get_log_entries,
    limited_get_log_entries,
    leader_bounded_stream,
    entries_stream,
    try_get_log_entry,
    log_reader_reads_new_entries,
    initial_logs,
    get_log_state,
    get_log_id,
    last_id_in_log,
    last_applied_state,
    purge_logs_upto_0,
    purge_logs_upto_5,
    purge_logs_upto_20,
    delete_logs_after_11,
    delete_logs_after_5,
    delete_logs_after_0,
    delete_logs_after_none,
    append_to_log,
    snapshot_meta,
    snapshot_meta_optional,
    apply_single,
    apply_multiple,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfer_snapshot() {
    S::transfer_snapshot(&Builder).await.unwrap();
}

//! Experiment 7 (Diff-Index): a hook. It returns a "not measured" section with
//! the paper's setup and claims, so the report shows what is still to reproduce; the verdicts
//! list the claims as not measured. An experiment is implemented by giving it a module like
//! `mixed.rs` and a match arm in `super::run`.

use super::{new_result, ExperimentId};
use crate::study::results::{ExperimentResult, Verdict};

struct Hook {
    paper: &'static str,
    reason: &'static str,
    claims: &'static [(&'static str, &'static str)],
}

fn hook(_id: ExperimentId) -> Hook {
    {
        Hook {
            paper: "Diff-Index measured update and read latency against offered load for its \
                    sync-full, sync-insert, async-simple and async-session schemes, range \
                    queries of growing selectivity, and a histogram of index lag.",
            reason: "the study does not run this experiment yet: the async-simple and \
                     async-session schemes exist, but its latency-against-load runs are not \
                     written",
            claims: &[
                (
                    "sync-insert updates are cheaper than sync-full; reads pay for it",
                    "Diff-Index §5",
                ),
                (
                    "asynchronous schemes have the lowest update latency, with a bounded index lag",
                    "Diff-Index §5",
                ),
            ],
        }
    }
}

/// The "not measured" section of a hook experiment.
pub fn not_measured(id: ExperimentId) -> ExperimentResult {
    let hook = hook(id);
    let mut result = new_result(id, hook.paper, "Not run by this version of the study.");
    "not-measured".clone_into(&mut result.status);
    hook.reason.clone_into(&mut result.note);
    result.verdicts = hook
        .claims
        .iter()
        .map(|(claim, source)| Verdict {
            claim: (*claim).to_owned(),
            source: (*source).to_owned(),
            outcome: "not-measured".to_owned(),
            evidence: hook.reason.to_owned(),
            numbers: std::collections::BTreeMap::new(),
        })
        .collect();
    result
}

//! Experiment 3 (LevelDB++ §5.2.2, Figures 12–15): the mixed workloads of Table 7b. Each
//! configuration indexes UserID only (as in the paper), gets the same preload, then the same
//! operations (generated once per workload); every tenth of the operations records the mean
//! latency per operation type and the cumulative bytes written (WAL, flushes, compactions) and
//! blocks read.

pub mod report;
pub mod verdicts;

use super::shared::copy_database;
use super::{loaded_database, new_result, note_failure, round, Context, ExperimentId};
use crate::results::{ExperimentResult, FigureInfo, Measurement};
use sift_bench::index::runner::execute;
use sift_bench::index::BenchError;
use sift_workload::{
    Attribute, Operation, OperationKind, TweetConfig, Workload, WorkloadGenerator,
};
use std::collections::BTreeMap;

pub const PAPER: &str = "LevelDB++ ran 50 million operations of each mix (write-heavy: 80% PUT, \
15% GET, 5% LOOKUP; read-heavy: 20/70/10; update-heavy: 40% PUT, 15% GET, 5% LOOKUP, 40% \
updates of existing ids), LOOKUPs top-10 on UserID, the only index, and recorded the mean time \
per operation every million operations (Fig. 12) and the cumulative disk I/O of compaction, \
GET and LOOKUP (Figures 13–15). Eager was left out as unusable. Findings: Lazy has the lowest \
mean latency in every mix (Composite is slightly better in update-heavy as the database \
grows); Lazy LOOKUPs beat Composite and Embedded; GET costs the same for every variant.";

pub const WORKLOADS: [Workload; 3] = [
    Workload::WriteHeavy,
    Workload::ReadHeavy,
    Workload::UpdateHeavy,
];

const SLICES: u64 = 10;

pub fn run(context: &Context<'_>) -> Result<ExperimentResult, BenchError> {
    let sizes = context.sizes;
    let mut result = new_result(
        ExperimentId::Mixed,
        PAPER,
        &format!(
            "Per workload and configuration, Sift loaded {} documents (not timed), flushed, then \
             ran the same {} operations of the mix (generated once per workload), with an index \
             on {} only and LOOKUPs top-10 on it. The preload is experiment 1's database of the \
             configuration on that attribute (copied for each workload; its table files \
             hard-linked); each tenth of the operations gives the mean latency per operation \
             type and the bytes written and blocks read so far.{}",
            sizes.mixed_preload,
            sizes.mixed_operations,
            context
                .data
                .attributes()
                .first()
                .map_or("the first attribute", |a| a.path.as_str()),
            if context.data.is_tweets() {
                ""
            } else {
                " On the user's file, PUTs take the file's next documents (then copies of \
                 random ones under new keys), UPDATEs give a written key the content of a random \
                 document of the file, GETs and LOOKUPs ask keys and values written so far \
                 (frequent values more often)."
            }
        ),
    );
    let mut notes = context.unknown_configuration_notes();
    let user_attribute = context
        .data
        .attributes()
        .into_iter()
        .find(|attribute| attribute.role == Attribute::UserId)
        .ok_or_else(|| BenchError::new("no UserID attribute"))?;
    let (preload, streams) = match context.data {
        StudyData::Tweets { seed } => tweet_streams(sizes, *seed)?,
        StudyData::File { .. } => user_streams(context, &user_attribute),
    };
    let total = context.known_configurations().len() * WORKLOADS.len();
    let mut run_number = 0;
    for configuration in context.known_configurations() {
        let slot = user_attribute.slot(&configuration.kind, configuration.maintenance.as_deref());
        let name = configuration.name();
        // The static experiment's UserID database of this configuration when it ran.
        let preloaded = match loaded_database(context, &name, std::slice::from_ref(&slot), &preload)
        {
            Ok(path) => path,
            Err(error) => {
                context.check_interrupt()?;
                note_failure(&mut notes, &format!("{name} preload"), &error);
                run_number += WORKLOADS.len();
                continue;
            }
        };
        for (workload, operations) in &streams {
            run_number += 1;
            let label = format!("[{run_number}/{total}] {name} {workload}");
            match run_one(
                context,
                &label,
                &name,
                *workload,
                std::slice::from_ref(&slot),
                &preloaded,
                operations,
            ) {
                Ok(mut found) => result.measurements.append(&mut found),
                Err(error) => {
                    context.check_interrupt()?;
                    note_failure(&mut notes, &label, &error);
                }
            }
        }
    }
    for workload in WORKLOADS {
        let name = workload.name();
        result.figures.push(FigureInfo {
            id: format!("mixed-{name}-all"),
            title: format!("{name}: mean latency per operation (µs) per tenth of the run"),
        });
        for op in ["PUT", "GET", "LOOKUP", "UPDATE"] {
            if op == "UPDATE" && workload != Workload::UpdateHeavy {
                continue;
            }
            result.figures.push(FigureInfo {
                id: format!("mixed-{name}-{}", op.to_ascii_lowercase()),
                title: format!("{name}: mean {op} latency (µs) per tenth of the run"),
            });
        }
        result.figures.push(FigureInfo {
            id: format!("mixed-{name}-io"),
            title: format!("{name}: cumulative bytes written (WAL, flush, compaction), MiB"),
        });
    }
    result.verdicts = verdicts::mixed_verdicts(&result.measurements, context.configurations);
    if !notes.is_empty() {
        "partial".clone_into(&mut result.status);
        result.note = notes.join("; ");
    }
    Ok(result)
}

use crate::data::{Document, StudyAttribute, StudyData};
use crate::engines::index::IndexSlot;
use crate::presets::Sizes;
use crate::user_workload::UserMix;

/// Each workload's operations, generated once and run on every configuration.
type Streams = Vec<(Workload, Vec<Operation>)>;

/// The preload and each workload's operations, from the tweet generator. The preload is the
/// static experiment's load (the same tweets: the tweet stream does not depend on the
/// workload), so its UserID databases serve as the preload when it ran.
fn tweet_streams(sizes: &Sizes, seed: u64) -> Result<(Vec<Document>, Streams), BenchError> {
    let config = TweetConfig::for_tweets(sizes.mixed_preload, seed);
    let mut preload: Vec<Document> = Vec::new();
    let mut streams = Vec::new();
    for workload in WORKLOADS {
        let mut generator = WorkloadGenerator::new(config.clone(), workload)
            .map_err(|e| BenchError::new(format!("workload: {e}")))?;
        let first = preload.is_empty();
        for _ in 0..sizes.mixed_preload {
            if let Operation::Put(tweet) = generator.put() {
                if first {
                    preload.push((tweet.fields.tweet_id, tweet.json));
                }
            }
        }
        let operations: Vec<Operation> = (0..sizes.mixed_operations)
            .map(|_| generator.next_operation())
            .collect();
        streams.push((workload, operations));
    }
    Ok((preload, streams))
}

/// The preload and each workload's operations on the user's file: the preload is the file's
/// first documents (experiment 1's load), the operations are derived from the file
/// (`user_workload`).
fn user_streams(context: &Context<'_>, attribute: &StudyAttribute) -> (Vec<Document>, Streams) {
    let sizes = context.sizes;
    let (preload, _) = context.data.load(sizes.mixed_preload);
    let (documents, values) = context.data.file_documents();
    let position = context
        .data
        .attributes()
        .iter()
        .position(|a| a == attribute)
        .unwrap_or(0);
    let values: Vec<Option<i64>> = values
        .iter()
        .map(|row| row.get(position).copied().flatten())
        .collect();
    let streams = WORKLOADS
        .iter()
        .enumerate()
        .map(|(number, &workload)| {
            let mut mix = UserMix::new(
                workload,
                documents,
                &values,
                context.data.primary_key(),
                attribute.clone(),
                preload.len(),
                number as u64 + 1,
            );
            let operations = (0..sizes.mixed_operations)
                .map(|_| mix.next_operation())
                .collect();
            (workload, operations)
        })
        .collect();
    (preload, streams)
}

/// Runs `operations` on a copy of the preloaded database in `preloaded`.
fn run_one(
    context: &Context<'_>,
    label: &str,
    name: &str,
    workload: Workload,
    slots: &[IndexSlot],
    preloaded: &std::path::Path,
    operations: &[Operation],
) -> Result<Vec<Measurement>, BenchError> {
    let dir = context.fresh_dir(name)?;
    let copy = dir.path().join("db");
    copy_database(preloaded, &copy)?;
    let engine = context.open(&copy, context.engine, slots)?;
    let mut out = Vec::new();
    let measured = (|| -> Result<(), BenchError> {
        context
            .progress
            .phase(label, operations.len() as u64, "operations");
        let start = engine.counters();
        let template = Measurement {
            configuration: name.to_owned(),
            workload: Some(workload.name().to_owned()),
            ..Measurement::default()
        };
        // Per operation type: (total microseconds, count) for the whole run.
        let mut whole: BTreeMap<&'static str, (f64, u64)> = BTreeMap::new();
        let mut done = 0_usize;
        for slice in 1..=SLICES {
            let end = (operations.len() as u64 * slice / SLICES) as usize;
            if end == done {
                continue;
            }
            let mut this: BTreeMap<&'static str, (f64, u64)> = BTreeMap::new();
            for operation in &operations[done..end] {
                let (latency, _) = execute(engine.as_ref(), operation)?;
                let micros = latency.as_secs_f64() * 1e6;
                let kind = match operation.kind() {
                    OperationKind::Put => "PUT",
                    OperationKind::Get => "GET",
                    OperationKind::Lookup => "LOOKUP",
                    OperationKind::RangeLookup => "RANGELOOKUP",
                    OperationKind::Update => "UPDATE",
                };
                for key in [kind, "ALL"] {
                    let entry = this.entry(key).or_insert((0.0, 0));
                    entry.0 += micros;
                    entry.1 += 1;
                }
            }
            context.progress.advance((end - done) as u64);
            context.check_interrupt()?;
            done = end;
            for (op, (micros, count)) in &this {
                let entry = whole.entry(op).or_insert((0.0, 0));
                entry.0 += micros;
                entry.1 += count;
                out.push(Measurement {
                    op: Some((*op).to_owned()),
                    slice: Some(slice as u32),
                    metric: "latency_mean".to_owned(),
                    unit: "us".to_owned(),
                    value: round(micros / *count as f64, 3),
                    count: Some(*count),
                    ..template.clone()
                });
            }
            let now = engine.counters();
            let labelled = Measurement {
                op: Some("ALL".to_owned()),
                slice: Some(slice as u32),
                count: Some(end as u64),
                ..template.clone()
            };
            if let (Some(before), Some(after)) = (start.bytes_written, now.bytes_written) {
                out.push(Measurement {
                    metric: "bytes_written_cumulative".to_owned(),
                    unit: "bytes".to_owned(),
                    value: after.saturating_sub(before) as f64,
                    ..labelled.clone()
                });
            }
            if let (Some(before), Some(after)) = (start.blocks_read, now.blocks_read) {
                out.push(Measurement {
                    metric: "blocks_read_cumulative".to_owned(),
                    unit: "blocks".to_owned(),
                    value: after.saturating_sub(before) as f64,
                    ..labelled
                });
            }
        }
        for (op, (micros, count)) in &whole {
            out.push(Measurement {
                op: Some((*op).to_owned()),
                metric: "latency_mean".to_owned(),
                unit: "us".to_owned(),
                value: round(micros / (*count).max(1) as f64, 3),
                count: Some(*count),
                ..template.clone()
            });
        }
        context.progress.phase_done();
        context.record_shape(label, engine.as_ref())?;
        Ok(())
    })();
    let closed = engine.close();
    measured?;
    closed?;
    Ok(out)
}

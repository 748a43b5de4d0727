//! Experiment 4 (LevelDB++ App. C.1 Table 8, App. C.2 Figures 18–19, App. C.3 Figure 20):
//! the bloom-filter bits per key, block compression and (`threads.rs`) client threads. Every configuration indexes both attributes; for each bits
//! per key (snappy compression) and for compression off (default bits per key) Sift loads the
//! same documents and measures the database size, the mean PUT latency, GETs, top-10 LOOKUPs
//! and top-10 RANGELOOKUPs on the first attribute, with blocks read per query.
//!
//! Sift's bloom filters are over the primary keys of each table (they serve GETs and the
//! validation reads of stand-alone indexes); LevelDB++'s Table 8 sweeps the filters of its
//! Embedded index over secondary values. The verdicts say which one was measured.

pub mod report;
pub mod threads;
pub mod verdicts;

use super::shared::{LoadKey, Loading};
use super::{
    grouped_sizes, measure_cell, new_result, note_failure, timed_load, CellBudget, Context,
    ExperimentId,
};
use crate::engines::index::IndexSlot;
use crate::presets::EngineSettings;
use crate::results::{ExperimentResult, FigureInfo, Measurement};
use crate::IndexConfiguration;
use sift_bench::index::BenchError;
use sift_workload::Operation;

pub const PAPER: &str = "LevelDB++ Table 8 loaded 20 million tweets with an Embedded index on \
UserID and ran 200K LOOKUPs for bloom filters of 20 to 1000 bits per key: LOOKUP latency falls \
from 52 ms (20 bits) to 20.5 ms (200 bits) as false positives drop, then rises again (1000 \
bits: 32 ms) as checking the filters costs more; the database grows with the bits (10.1 to \
14.3 GB). App. C.2 rebuilt the UserID indexes without compression: every variant keeps its rank, \
queries are slightly slower uncompressed, and PUT cost is almost identical. App. C.3 (Figure 20) \
repeated the top-10 LOOKUPs and RANGELOOKUPs on UserID with more and more concurrent threads: the \
variants keep their relative order, stand-alone indexes get slightly higher throughput than \
Embedded at high concurrency, and more threads do not necessarily raise throughput much (it even \
falls in some cases) as threads compete for the database's components.";

/// The kinds the bits-per-key sweep loads (the first configuration of each; the default bits
/// are every configuration's experiment 1 database): Embedded, whose filters the paper swept,
/// and Lazy, whose LOOKUPs read documents by primary key (where Sift's filters act).
pub const BLOOM_SWEEP_KINDS: [&str; 2] = ["embedded", "lazy"];

/// The kinds loaded without compression: the four variants of LevelDB++ App. C.2.
pub const COMPRESSION_KINDS: [&str; 4] = ["embedded", "eager", "lazy", "composite"];

pub fn run(context: &Context<'_>) -> Result<ExperimentResult, BenchError> {
    let sizes = context.sizes;
    let attributes = context.data.attributes();
    let (documents, mut queries) = context.data.load(sizes.sweep_documents);
    let first = attributes
        .first()
        .ok_or_else(|| BenchError::new("no attribute to index"))?
        .clone();
    let gets: Vec<Operation> = (0..sizes.sweep_queries)
        .filter_map(|_| queries.get())
        .collect();
    let lookups: Vec<Operation> = (0..sizes.sweep_queries)
        .filter_map(|_| queries.lookup(first.role, Some(10)))
        .collect();
    let selectivity = first.selectivities()[0];
    let ranges: Vec<Operation> = (0..sizes.sweep_queries)
        .filter_map(|_| queries.range_lookup(first.role, selectivity, Some(10)))
        .collect();
    let mut result = new_result(
        ExperimentId::BloomCompression,
        PAPER,
        &(format!(
            "For each bloom-filter setting ({} bits per primary key, snappy) and with \
             compression off ({} bits per key), Sift loaded {} documents with an index on {} \
             only (the paper rebuilt its UserID indexes), then measured the size on disk, the \
             mean PUT latency, up to {} GETs, {} top-10 LOOKUPs and {} top-10 RANGELOOKUPs ({} \
             {}) on {}. The default bits with snappy is experiment 1's database of every \
             configuration (not loaded again); compression off is loaded for the first \
             configuration of each of {} (the paper's four variants), the other bits for the \
             first of each of {} (Embedded is what the paper swept; Lazy reads documents by \
             primary key, where Sift's filters act), which keeps the run within its budget.",
            sizes
                .bloom_bits_per_key
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            context.engine.bloom_bits_per_key,
            documents.len(),
            first.path,
            gets.len(),
            lookups.len(),
            ranges.len(),
            selectivity,
            first.range_unit(),
            first.path,
            COMPRESSION_KINDS.join(", "),
            BLOOM_SWEEP_KINDS.join(", ")
        ) + &format!(
            " Thread sweep (App. C.3): for each configuration and {} client threads, each \
             thread runs the same top-10 LOOKUPs and RANGELOOKUPs on the configuration's \
             database (default settings, index on {} only; queries per second over all \
             threads), and a fresh database is loaded with the first twentieth of the documents by \
             that many threads (PUT throughput over the load's wall-clock time; four loads per \
             configuration, hence the twentieth). This machine has {} CPU cores, so more threads \
             than cores cannot add throughput.",
            sizes
                .thread_counts
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            first.path,
            std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
        )),
    );
    let mut notes = context.unknown_configuration_notes();
    let configurations = context.known_configurations();
    let default_bits = context.engine.bloom_bits_per_key;
    // (bits, compression, configurations): the default point and compression off for every
    // configuration; the other bits only for the kinds whose queries the filters can serve.
    let first_of = |kinds: &[&str]| -> Vec<&IndexConfiguration> {
        kinds
            .iter()
            .filter_map(|kind| configurations.iter().copied().find(|c| c.kind == *kind))
            .collect()
    };
    let swept = first_of(&BLOOM_SWEEP_KINDS);
    let mut points: Vec<(u32, &str, Vec<&IndexConfiguration>)> =
        vec![(default_bits, "snappy", configurations.clone())];
    for &bits in &sizes.bloom_bits_per_key {
        if bits != default_bits {
            points.push((bits, "snappy", swept.clone()));
        }
    }
    points.push((default_bits, "none", first_of(&COMPRESSION_KINDS)));
    let total: usize = points.iter().map(|(_, _, c)| c.len()).sum();
    let mut run_number = 0;
    let budget = CellBudget::of(sizes);
    for (bits, compression, point_configurations) in &points {
        let (bits, compression) = (*bits, *compression);
        let settings = EngineSettings {
            bloom_bits_per_key: bits,
            compression: compression.to_owned(),
            ..context.engine.clone()
        };
        for configuration in point_configurations {
            run_number += 1;
            let name = configuration.name();
            let label = format!(
                "[{run_number}/{total}] {name}, {bits} bits/key, compression {compression}"
            );
            let slot = first.slot(&configuration.kind, configuration.maintenance.as_deref());
            let outcome = measure_point(
                context,
                &label,
                &name,
                &settings,
                &slot,
                &documents,
                &[
                    ("GET", &gets, None, None, None),
                    ("LOOKUP", &lookups, Some("10"), None, Some(&first.path)),
                    (
                        "RANGELOOKUP",
                        &ranges,
                        Some("10"),
                        Some(selectivity),
                        Some(&first.path),
                    ),
                ],
                &budget,
            );
            match outcome {
                Ok(mut found) => result.measurements.append(&mut found),
                Err(error) => {
                    context.check_interrupt()?;
                    note_failure(&mut notes, &label, &error);
                }
            }
        }
    }
    let sweep_queries = threads::SweepQueries {
        attribute: &first,
        lookups: &lookups,
        ranges: &ranges,
        range_selectivity: selectivity,
    };
    // A twentieth of the documents per threaded load: it loads four databases per
    // configuration.
    let part = &documents[..(documents.len() / 20).max(documents.len().min(10))];
    let mut swept = threads::run(context, &documents, part, &sweep_queries, &mut notes)?;
    result.measurements.append(&mut swept);
    for (id, title) in [
        (
            "bloom-lookup",
            format!(
                "Top-10 LOOKUP latency on {} (mean, µs) by bloom bits per key",
                first.path
            ),
        ),
        (
            "bloom-get",
            "GET latency (mean, µs) by bloom bits per key".to_owned(),
        ),
        (
            "bloom-size",
            "Database size (MiB) by bloom bits per key".to_owned(),
        ),
        (
            "compression-size",
            "Database size (MiB): snappy (solid) vs uncompressed (light)".to_owned(),
        ),
        (
            "compression-put",
            "Mean PUT latency (µs): snappy (solid) vs uncompressed (light)".to_owned(),
        ),
        (
            "compression-lookup",
            format!(
                "Top-10 LOOKUP latency on {} (median, µs): snappy (solid) vs uncompressed (light)",
                first.path
            ),
        ),
    ] {
        result.figures.push(FigureInfo {
            id: id.to_owned(),
            title,
        });
    }
    result.verdicts = verdicts::bloom_compression_verdicts(
        &result.measurements,
        context.configurations,
        context.engine.bloom_bits_per_key,
    );
    result.figures.extend(threads::figures(&first.path));
    result.verdicts.extend(threads::thread_verdicts(
        &result.measurements,
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
    ));
    if !notes.is_empty() {
        "partial".clone_into(&mut result.status);
        result.note = notes.join("; ");
    }
    Ok(result)
}

/// One query cell of a point: op, operations, top-K, selectivity, attribute.
type PointCell<'a> = (
    &'a str,
    &'a Vec<Operation>,
    Option<&'a str>,
    Option<u64>,
    Option<&'a String>,
);

/// Loads (or finds, when experiment 1 loaded it with the same settings) the database of one
/// configuration at one point and measures its size, PUT cost and queries.
#[allow(clippy::too_many_arguments)]
fn measure_point(
    context: &Context<'_>,
    label: &str,
    name: &str,
    settings: &EngineSettings,
    slot: &IndexSlot,
    documents: &[(u64, String)],
    cells: &[PointCell<'_>],
    budget: &CellBudget,
) -> Result<Vec<Measurement>, BenchError> {
    let key = LoadKey {
        settings: settings.clone(),
        documents: documents.len() as u64,
        slots: vec![slot.clone()],
    };
    let mut loading = Loading::new(context.shared, key, true, || context.fresh_dir(name))?;
    let engine = context.open(loading.path(), settings, std::slice::from_ref(slot))?;
    let mut out = Vec::new();
    let template = Measurement {
        configuration: name.to_owned(),
        bloom_bits_per_key: Some(settings.bloom_bits_per_key),
        compression: Some(settings.compression.clone()),
        ..Measurement::default()
    };
    let measured = (|| -> Result<(), BenchError> {
        if loading.is_fresh() {
            let load = timed_load(context, engine.as_ref(), documents, 1, label)?;
            loading.summary.put_latency_mean_us = Some(load.whole.mean);
        }
        if let Some(mean) = loading.summary.put_latency_mean_us {
            out.push(Measurement {
                op: Some("PUT".to_owned()),
                metric: "put_latency_mean".to_owned(),
                unit: "us".to_owned(),
                value: mean,
                count: Some(documents.len() as u64),
                ..template.clone()
            });
        }
        let total_bytes: u64 = grouped_sizes(engine.as_ref())?
            .iter()
            .map(|(_, bytes)| bytes)
            .sum();
        out.push(Measurement {
            metric: "bytes_on_disk".to_owned(),
            unit: "bytes".to_owned(),
            value: total_bytes as f64,
            ..template.clone()
        });
        context.record_shape(label, engine.as_ref())?;
        context.progress.phase(
            &format!("{label}: queries"),
            cells.len() as u64,
            "measurements",
        );
        for (op, operations, top_k, selectivity, attribute) in cells {
            if operations.is_empty() {
                continue;
            }
            let cell = measure_cell(context, engine.as_ref(), operations, budget)?;
            let labelled = Measurement {
                op: Some((*op).to_owned()),
                attribute: attribute.cloned(),
                top_k: top_k.map(str::to_owned),
                selectivity: *selectivity,
                ..template.clone()
            };
            for (metric, value) in [
                ("latency_mean", cell.all.mean),
                ("latency_p50", cell.all.p50),
                ("latency_p95", cell.all.p95),
            ] {
                out.push(Measurement {
                    metric: metric.to_owned(),
                    unit: "us".to_owned(),
                    value,
                    count: Some(cell.all.count),
                    ..labelled.clone()
                });
            }
            super::push_blocks(&mut out, &labelled, &cell);
        }
        context.progress.phase_done();
        Ok(())
    })();
    let closed = engine.close();
    measured?;
    closed?;
    loading.keep(context.shared);
    Ok(out)
}

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

use super::{
    grouped_sizes, measure_cell, new_result, note_failure, timed_load, Context, ExperimentId,
};
use crate::presets::EngineSettings;
use crate::results::{ExperimentResult, FigureInfo, Measurement};
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
             compression off ({} bits per key), Sift loaded {} documents per configuration with \
             both attributes indexed, then measured the size on disk, the mean PUT latency, {} \
             GETs, {} top-10 LOOKUPs and {} top-10 RANGELOOKUPs ({} {}) on {}.",
            sizes
                .bloom_bits_per_key
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            context.engine.bloom_bits_per_key,
            documents.len(),
            gets.len(),
            lookups.len(),
            ranges.len(),
            selectivity,
            first.range_unit(),
            first.path
        ) + &format!(
            " Thread sweep (App. C.3): for each configuration and {} client threads, a fresh \
             database (default settings, index on {} only) is loaded with the first half of \
             the documents by that many threads \
             (PUT throughput over the load's wall-clock time), then each thread runs the same \
             top-10 LOOKUPs and RANGELOOKUPs (queries per second over all threads). This \
             machine has {} CPU cores, so more threads than cores cannot add throughput.",
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
    let mut points: Vec<(u32, &str)> = sizes
        .bloom_bits_per_key
        .iter()
        .map(|&bits| (bits, "snappy"))
        .collect();
    if !points.contains(&(context.engine.bloom_bits_per_key, "snappy")) {
        points.push((context.engine.bloom_bits_per_key, "snappy"));
    }
    points.push((context.engine.bloom_bits_per_key, "none"));
    let configurations = context.known_configurations();
    let total = points.len() * configurations.len();
    let mut run_number = 0;
    for &(bits, compression) in &points {
        let settings = EngineSettings {
            bloom_bits_per_key: bits,
            compression: compression.to_owned(),
            ..context.engine.clone()
        };
        for configuration in &configurations {
            run_number += 1;
            let name = configuration.name();
            let label = format!(
                "[{run_number}/{total}] {name}, {bits} bits/key, compression {compression}"
            );
            let slots: Vec<_> = attributes
                .iter()
                .map(|attribute| {
                    attribute.slot(&configuration.kind, configuration.maintenance.as_deref())
                })
                .collect();
            let outcome = (|| -> Result<Vec<Measurement>, BenchError> {
                let dir = context.fresh_dir(&name)?;
                let engine = context.open(dir.path(), &settings, &slots)?;
                let mut out = Vec::new();
                let template = Measurement {
                    configuration: name.clone(),
                    bloom_bits_per_key: Some(bits),
                    compression: Some(compression.to_owned()),
                    ..Measurement::default()
                };
                let measured = (|| -> Result<(), BenchError> {
                    let load = timed_load(context, engine.as_ref(), &documents, 1, &label)?;
                    out.push(Measurement {
                        op: Some("PUT".to_owned()),
                        metric: "put_latency_mean".to_owned(),
                        unit: "us".to_owned(),
                        value: load.whole.mean,
                        count: Some(load.whole.count),
                        ..template.clone()
                    });
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
                    context
                        .progress
                        .phase(&format!("{label}: queries"), 3, "measurements");
                    for (op, operations, top_k, selectivity, attribute) in [
                        ("GET", &gets, None, None, None),
                        ("LOOKUP", &lookups, Some("10"), None, Some(&first.path)),
                        (
                            "RANGELOOKUP",
                            &ranges,
                            Some("10"),
                            Some(selectivity),
                            Some(&first.path),
                        ),
                    ] {
                        if operations.is_empty() {
                            continue;
                        }
                        let cell = measure_cell(
                            context,
                            engine.as_ref(),
                            operations,
                            sizes.repetitions,
                            sizes.cell_seconds_max,
                        )?;
                        let labelled = Measurement {
                            op: Some(op.to_owned()),
                            attribute: attribute.cloned(),
                            top_k: top_k.map(str::to_owned),
                            selectivity,
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
                        if let Some(blocks) = cell.blocks_per_query {
                            out.push(Measurement {
                                metric: "blocks_read_per_query".to_owned(),
                                unit: "blocks".to_owned(),
                                value: blocks,
                                count: Some(cell.all.count),
                                ..labelled
                            });
                        }
                    }
                    context.progress.phase_done();
                    Ok(())
                })();
                let closed = engine.close();
                measured?;
                closed?;
                Ok(out)
            })();
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
    // Half the documents: the sweep opens four databases per configuration.
    let half = &documents[..(documents.len() / 2).max(documents.len().min(10))];
    let mut swept = threads::run(context, half, &sweep_queries, &mut notes)?;
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

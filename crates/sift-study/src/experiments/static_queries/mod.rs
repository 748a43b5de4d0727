//! Experiments 1 and 2 (LevelDB++ §5.2.1, Figures 8–11): the static workload. Every
//! configuration indexes one attribute at a time (as the paper isolates each index's cost),
//! plus a baseline without a secondary index. Experiment 1 times the load in slices (PUT
//! throughput over time), measures the database size split into data and index trees and the
//! GET latency; experiment 2 loads the same documents and measures LOOKUP and RANGELOOKUP
//! latency distributions for each top-K and selectivity, with blocks read per query.

pub mod report;
pub mod verdicts;

use super::shared::Loading;
use super::{
    grouped_sizes, measure_cell, new_result, note_failure, round, timed_load, untimed_load,
    CellBudget, Context, ExperimentId,
};
use crate::data::StudyAttribute;
use crate::engines::index::IndexSlot;
use crate::results::{ExperimentResult, FigureInfo, Measurement};
use crate::BASELINE;
use sift_bench::index::BenchError;
use sift_workload::{table7, Operation};

pub const STATIC_PAPER: &str = "LevelDB++ loaded 180 million tweets (100 GB) with one secondary \
index at a time on UserID (not time-correlated) and CreationTime (time-correlated) and timed \
the PUTs once per million insertions (Fig. 9), measured the database size (Fig. 8a) and the GET \
latency (Fig. 8c). Findings: Embedded adds almost nothing to PUT cost; Composite has the best \
PUT among stand-alone indexes; Eager is extremely slow on UserID and gets slower as the \
database grows (merge compactions of long posting lists) but is fine on CreationTime; Eager and \
Lazy take more space than Composite (Lazy the most: fragmented lists); GET latency is the same \
for every index variant.";

pub const QUERIES_PAPER: &str = "LevelDB++ ran 15K LOOKUPs and 50K RANGELOOKUPs per index with \
top-K 10, 100 and no limit, ranges of 10 and 100 users (UserID) or 1 and 100 minutes \
(CreationTime), and drew the latencies as box plots (Figures 10, 11). Findings: Lazy is best \
for LOOKUP with small top-K; Composite is best when K is large or unlimited; for RANGELOOKUP on \
UserID Lazy is best with small K and Composite otherwise; Embedded (zone maps) wins \
RANGELOOKUPs on the time-correlated CreationTime.";

fn slug(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn top_k_label(top_k: Option<usize>) -> String {
    top_k.map_or_else(|| "all".to_owned(), |k| k.to_string())
}

/// The queries of experiment 2 for one attribute: (op, top-K, selectivity, operations).
type QueryCells = Vec<(&'static str, Option<usize>, Option<u64>, Vec<Operation>)>;

fn query_cells(
    context: &Context<'_>,
    queries: &mut dyn crate::data::QuerySource,
    attribute: &StudyAttribute,
) -> QueryCells {
    let sizes = context.sizes;
    let mut cells = Vec::new();
    for top_k in table7::STATIC_TOP_K {
        let operations: Vec<Operation> = (0..sizes.lookups)
            .filter_map(|_| queries.lookup(attribute.role, top_k))
            .collect();
        cells.push(("LOOKUP", top_k, None, operations));
    }
    for &selectivity in attribute.selectivities() {
        for top_k in table7::STATIC_TOP_K {
            let operations: Vec<Operation> = (0..sizes.range_lookups)
                .filter_map(|_| queries.range_lookup(attribute.role, selectivity, top_k))
                .collect();
            cells.push(("RANGELOOKUP", top_k, Some(selectivity), operations));
        }
    }
    cells.retain(|(_, _, _, operations)| !operations.is_empty());
    cells
}

/// Runs experiment 1 (`load`) or 2 (`queries`).
pub fn run(
    context: &Context<'_>,
    load: bool,
    queries: bool,
) -> Result<ExperimentResult, BenchError> {
    let id = if load {
        ExperimentId::Static
    } else {
        ExperimentId::Queries
    };
    let sizes = context.sizes;
    let attributes = context.data.attributes();
    let (documents, mut query_source) = context.data.load(sizes.documents);
    let gets: Vec<Operation> = (0..sizes.gets).filter_map(|_| query_source.get()).collect();
    let cells: Vec<(StudyAttribute, QueryCells)> = if queries {
        attributes
            .iter()
            .map(|attribute| {
                (
                    attribute.clone(),
                    query_cells(context, query_source.as_mut(), attribute),
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    let method = if load {
        format!(
            "Sift loaded {} documents per configuration and attribute (one secondary index \
             at a time, plus a baseline without one), timing every PUT and reporting {} slices; \
             then flushed and waited for compactions, measured the bytes of the data and index \
             trees, and ran up to {} GETs (up to {} passes after a warm-up, stopping once the \
             median is known to {}% at 95% confidence). Experiments 2-4 measure these same \
             databases again instead of loading their own.",
            documents.len(),
            sizes.slices,
            gets.len(),
            sizes.repetitions,
            sizes.cell_precision * 100.0
        )
    } else {
        format!(
            "Sift measured the databases experiment 1 loaded ({} documents per configuration \
             and attribute; loaded here when experiment 1 did not run), with up to {} LOOKUPs \
             per top-K (10, 100, all) and {} RANGELOOKUPs per selectivity and top-K after a \
             warm-up pass over a tenth of them. Each measurement makes up to {} passes and \
             stops as soon as its median is known to {}% at 95% confidence (after at least {} \
             queries), or after {} s. Latencies are the time inside the query call including \
             reading every hit's document; blocks are data/index blocks read from files or \
             cache.",
            documents.len(),
            sizes.lookups,
            sizes.range_lookups,
            sizes.repetitions,
            sizes.cell_precision * 100.0,
            sizes.cell_samples_min,
            sizes.cell_seconds_max
        )
    };
    let mut result = new_result(id, if load { STATIC_PAPER } else { QUERIES_PAPER }, &method);
    let mut notes = context.unknown_configuration_notes();
    let mut measurements = Vec::new();

    // (configuration name, kind, maintenance, attribute); the baseline has no index.
    let mut runs: Vec<(String, Option<IndexSlotSource>, Option<StudyAttribute>)> = Vec::new();
    if load {
        runs.push((BASELINE.to_owned(), None, None));
    }
    for configuration in context.known_configurations() {
        for attribute in &attributes {
            runs.push((
                configuration.name(),
                Some(IndexSlotSource {
                    kind: configuration.kind.clone(),
                    maintenance: configuration.maintenance.clone(),
                }),
                Some(attribute.clone()),
            ));
        }
    }
    for (position, (name, source, attribute)) in runs.iter().enumerate() {
        let label = match attribute {
            Some(attribute) => format!(
                "[{}/{}] {name} on {}",
                position + 1,
                runs.len(),
                attribute.path
            ),
            None => format!("[{}/{}] no secondary index", position + 1, runs.len()),
        };
        let slots: Vec<IndexSlot> = match (source, attribute) {
            (Some(source), Some(attribute)) => {
                vec![attribute.slot(&source.kind, source.maintenance.as_deref())]
            }
            _ => Vec::new(),
        };
        let outcome = measure_one(
            context,
            &label,
            name,
            attribute.as_ref(),
            &slots,
            &documents,
            &gets,
            cells
                .iter()
                .find(|(a, _)| Some(a) == attribute.as_ref())
                .map(|(_, cells)| cells),
            load,
        );
        match outcome {
            Ok(mut found) => measurements.append(&mut found),
            Err(error) => {
                context.check_interrupt()?;
                note_failure(&mut notes, &label, &error);
            }
        }
    }
    result.measurements = measurements;
    if load {
        for attribute in &attributes {
            result.figures.push(FigureInfo {
                id: format!("static-put-{}", slug(&attribute.path)),
                title: format!(
                    "PUT throughput over the load, index on {} (ops/s per slice)",
                    attribute.path
                ),
            });
        }
        result.figures.push(FigureInfo {
            id: "static-size".to_owned(),
            title: "Database size after the load: data and index trees (MiB)".to_owned(),
        });
        result.figures.push(FigureInfo {
            id: "static-get".to_owned(),
            title: "GET latency (µs), by indexed attribute".to_owned(),
        });
        result.verdicts = verdicts::static_verdicts(&result.measurements, context.configurations);
    } else {
        for attribute in &attributes {
            for (op, title) in [("lookup", "LOOKUP"), ("range", "RANGELOOKUP")] {
                result.figures.push(FigureInfo {
                    id: format!("queries-{op}-{}", slug(&attribute.path)),
                    title: format!(
                        "{title} latency on {} (µs) by top-K{}",
                        attribute.path,
                        if op == "range" {
                            format!(" and selectivity ({})", attribute.range_unit())
                        } else {
                            String::new()
                        }
                    ),
                });
            }
            result.figures.push(FigureInfo {
                id: format!("queries-blocks-{}", slug(&attribute.path)),
                title: format!("Blocks read per query on {}", attribute.path),
            });
        }
        result.verdicts = verdicts::query_verdicts(&result.measurements, context.configurations);
    }
    if !notes.is_empty() {
        "partial".clone_into(&mut result.status);
        result.note = notes.join("; ");
    }
    Ok(result)
}

/// Kind and maintenance of a run's index.
struct IndexSlotSource {
    kind: String,
    maintenance: Option<String>,
}

#[allow(clippy::too_many_arguments)]
fn measure_one(
    context: &Context<'_>,
    label: &str,
    name: &str,
    attribute: Option<&StudyAttribute>,
    slots: &[IndexSlot],
    documents: &[(u64, String)],
    gets: &[Operation],
    cells: Option<&QueryCells>,
    load: bool,
) -> Result<Vec<Measurement>, BenchError> {
    // Experiment 2 measures the database experiment 1 loaded, when there is one.
    let key = context.load_key(documents.len() as u64, slots);
    let mut loading = Loading::new(context.shared, key, !load, || context.fresh_dir(name))?;
    let engine = context.open(loading.path(), context.engine, slots)?;
    let mut out = Vec::new();
    let template = Measurement {
        configuration: name.to_owned(),
        attribute: attribute.map(|a| a.path.clone()),
        ..Measurement::default()
    };
    let budget = CellBudget::of(context.sizes);
    let measured = (|| -> Result<(), BenchError> {
        if load {
            let stats = timed_load(
                context,
                engine.as_ref(),
                documents,
                context.sizes.slices,
                label,
            )?;
            loading.summary.put_latency_mean_us = Some(stats.whole.mean);
            push_load(&mut out, &template, &stats);
            for (tree, bytes) in grouped_sizes(engine.as_ref())? {
                out.push(Measurement {
                    tree: Some(tree.to_owned()),
                    metric: "bytes_on_disk".to_owned(),
                    unit: "bytes".to_owned(),
                    value: bytes as f64,
                    ..template.clone()
                });
            }
            context.record_shape(label, engine.as_ref())?;
            if !gets.is_empty() {
                context
                    .progress
                    .phase(&format!("{label}: GETs"), 1, "measurements");
                let cell = measure_cell(context, engine.as_ref(), gets, &budget)?;
                context.progress.phase_done();
                let get = Measurement {
                    op: Some("GET".to_owned()),
                    ..template.clone()
                };
                push_cell(&mut out, &get, &cell);
            }
        } else {
            if loading.is_fresh() {
                untimed_load(context, engine.as_ref(), documents, label)?;
            }
            context.record_shape(label, engine.as_ref())?;
        }
        if let Some(cells) = cells {
            context.progress.phase(
                &format!("{label}: queries"),
                cells.len() as u64,
                "measurements",
            );
            for (op, top_k, selectivity, operations) in cells {
                let cell = measure_cell(context, engine.as_ref(), operations, &budget)?;
                let labelled = Measurement {
                    op: Some((*op).to_owned()),
                    top_k: Some(top_k_label(*top_k)),
                    selectivity: *selectivity,
                    ..template.clone()
                };
                push_cell(&mut out, &labelled, &cell);
            }
            context.progress.phase_done();
        }
        Ok(())
    })();
    let closed = engine.close();
    measured?;
    closed?;
    loading.keep(context.shared);
    Ok(out)
}

/// The measurements of a timed load: per slice and for the whole load.
fn push_load(out: &mut Vec<Measurement>, template: &Measurement, stats: &super::LoadStats) {
    for (position, slice) in stats.slices.iter().enumerate() {
        let labelled = Measurement {
            op: Some("PUT".to_owned()),
            slice: Some(position as u32 + 1),
            count: Some(slice.count),
            ..template.clone()
        };
        out.push(Measurement {
            metric: "put_throughput".to_owned(),
            unit: "ops/s".to_owned(),
            value: round(slice.count as f64 / slice.busy_s.max(1e-9), 1),
            ..labelled.clone()
        });
        out.push(Measurement {
            metric: "put_latency_mean".to_owned(),
            unit: "us".to_owned(),
            value: slice.latency.mean,
            ..labelled.clone()
        });
        out.push(Measurement {
            metric: "documents_loaded".to_owned(),
            unit: "documents".to_owned(),
            value: slice.loaded as f64,
            ..labelled
        });
    }
    let whole = Measurement {
        op: Some("PUT".to_owned()),
        ..template.clone()
    };
    stats.whole.push(out, &whole, "put_latency");
    out.push(Measurement {
        metric: "put_throughput".to_owned(),
        unit: "ops/s".to_owned(),
        value: round(stats.whole.count as f64 / stats.busy_s.max(1e-9), 1),
        count: Some(stats.whole.count),
        ..whole.clone()
    });
    out.push(Measurement {
        metric: "settle_time".to_owned(),
        unit: "s".to_owned(),
        value: round(stats.settle_s, 4),
        ..whole.clone()
    });
    if let Some(written) = stats.bytes_written {
        out.push(Measurement {
            metric: "bytes_written".to_owned(),
            unit: "bytes".to_owned(),
            value: written as f64,
            ..whole.clone()
        });
        out.push(Measurement {
            metric: "write_amplification".to_owned(),
            unit: "bytes written per document byte".to_owned(),
            value: round(written as f64 / stats.document_bytes.max(1) as f64, 3),
            ..whole
        });
    }
}

/// The measurements of a query cell: its distribution, per-pass medians, the confidence
/// interval of its median, hits and blocks per query.
fn push_cell(out: &mut Vec<Measurement>, labelled: &Measurement, cell: &super::CellStats) {
    cell.all.push(out, labelled, "latency");
    push_repetitions(out, labelled, &cell.repetition_medians_us);
    for (metric, value) in [
        ("latency_p50_ci_low", cell.median_ci_us.0),
        ("latency_p50_ci_high", cell.median_ci_us.1),
    ] {
        out.push(Measurement {
            metric: metric.to_owned(),
            unit: "us".to_owned(),
            value,
            count: Some(cell.all.count),
            ..labelled.clone()
        });
    }
    out.push(Measurement {
        metric: "hits_per_query".to_owned(),
        unit: "documents".to_owned(),
        value: cell.hits_per_query,
        count: Some(cell.all.count),
        ..labelled.clone()
    });
    super::push_blocks(out, labelled, cell);
}

/// The median of each repetition, labelled with its number.
pub fn push_repetitions(out: &mut Vec<Measurement>, template: &Measurement, medians: &[f64]) {
    for (position, median) in medians.iter().enumerate() {
        out.push(Measurement {
            repetition: Some(position as u32 + 1),
            metric: "latency_p50".to_owned(),
            unit: "us".to_owned(),
            value: *median,
            ..template.clone()
        });
    }
}

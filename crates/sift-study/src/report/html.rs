//! `index.html`: one self-contained page (inline CSS and SVG, no scripts, no network) with the
//! run's machine and configuration, one section per experiment (what the paper measured and
//! found, what Sift measured, figures, tables, verdicts) and the recommendation table.
//!
//! Every figure listed in an experiment's `figures` is drawn here from its measurements, as
//! `<figure id="fig-{id}" class="plot">` holding one `<svg>`; each configuration has the same
//! colour in every plot (`ConfigurationInfo::colour`, grey for the no-index baseline).

use crate::experiments::ExperimentId;
use crate::figure::svg::{bar_chart, escape};
use crate::figure::{colour, format_cell};
use crate::results::{ExperimentResult, FigureInfo, StudyResults};
use crate::BASELINE_COLOUR;
use std::fmt::Write;

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:24px auto;padding:0 16px;\
color:#222;line-height:1.45}h1{margin-bottom:4px}h2{border-bottom:2px solid #ddd;padding-bottom:4px;\
margin-top:40px}table{border-collapse:collapse;margin:10px 0;font-size:13px}td,th{border:1px solid #ccc;\
padding:3px 7px;text-align:right}th{background:#f3f3f3}td.text,th.text{text-align:left}\
.figures{display:flex;flex-wrap:wrap;gap:12px}figure.plot{margin:0;border:1px solid #e3e3e3;padding:4px}\
figcaption{font-size:12px;color:#555;max-width:680px}.reproduced{background:#d8f0d8}\
.differs{background:#fbe0c8}.not-measured{background:#e8e8e8}.badge{padding:1px 6px;border-radius:3px;\
font-weight:bold;font-size:12px}.swatch{display:inline-block;width:12px;height:12px;margin-right:4px;\
vertical-align:middle}.note{color:#8a4b00}details{margin:8px 0}";

/// Draws figure `figure` of `experiment`.
fn figure_svg(
    results: &StudyResults,
    experiment: &ExperimentResult,
    figure: &FigureInfo,
) -> String {
    crate::experiments::report_figure(results, experiment, figure)
        .unwrap_or_else(|| bar_chart(&figure.title, "", "", &[], &[]))
}

fn verdict_table(experiment: &ExperimentResult) -> String {
    if experiment.verdicts.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<table class=\"verdicts\"><tr><th class=\"text\">claim</th><th class=\"text\">source</th>\
         <th class=\"text\">verdict</th><th class=\"text\">across sizes</th><th class=\"text\">deciding numbers</th></tr>",
    );
    for v in &experiment.verdicts {
        let _ = write!(
            out,
            "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\"><span class=\"badge {}\">{}</span></td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
            escape(&v.claim),
            escape(&v.source),
            escape(&v.outcome),
            escape(&v.outcome.replace('-', " ")),
            escape(v.across_sizes.as_deref().unwrap_or("one size measured")),
            escape(&v.evidence)
        );
    }
    out.push_str("</table>");
    out
}

fn section(out: &mut String, results: &StudyResults, experiment: &ExperimentResult) {
    let _ = write!(
        out,
        "<section id=\"experiment-{}\"><h2>{}. {}</h2>",
        escape(&experiment.id),
        experiment.number,
        escape(&experiment.title)
    );
    let _ = write!(
        out,
        "<p><b>Status:</b> <span class=\"badge {}\">{}</span>{}</p>",
        if experiment.status == "not-measured" {
            "not-measured"
        } else if experiment.status == "partial" {
            "differs"
        } else {
            "reproduced"
        },
        escape(&experiment.status),
        if experiment.duration_s > 0.0 {
            format!(" in {:.1} s", experiment.duration_s)
        } else {
            String::new()
        }
    );
    if !experiment.note.is_empty() {
        let _ = write!(out, "<p class=\"note\">{}</p>", escape(&experiment.note));
    }
    let _ = write!(
        out,
        "<h3>What the paper measured and found</h3><p>{}</p><h3>What Sift measured</h3><p>{}</p>",
        escape(&experiment.paper),
        escape(&experiment.method)
    );
    if !experiment.figures.is_empty() {
        out.push_str("<div class=\"figures\">");
        for figure in &experiment.figures {
            let _ = write!(
                out,
                "<figure id=\"fig-{}\" class=\"plot\">{}<figcaption>{}</figcaption></figure>",
                escape(&figure.id),
                figure_svg(results, experiment, figure),
                escape(&figure.title)
            );
        }
        out.push_str("</div>");
    }
    let tables = crate::experiments::report_tables(experiment);
    if !tables.is_empty() {
        let _ = write!(
            out,
            "<details open><summary>Table of measurements (every number is in results.json and {}.csv)</summary>{tables}</details>",
            escape(&experiment.id)
        );
    }
    if !experiment.verdicts.is_empty() {
        out.push_str("<h3>Verdicts from this run</h3>");
        out.push_str(&verdict_table(experiment));
    }
    out.push_str(&super::scales::verdicts_across_sizes(experiment));
    out.push_str(&super::scales::engine_and_shapes(experiment));
    out.push_str("</section>");
}

fn recommendations(out: &mut String, results: &StudyResults) {
    out.push_str(
        "<section id=\"recommendations\"><h2>Recommendations</h2><p>For each attribute and \
         workload, the configuration with the lowest cost on this machine — the LevelDB++ \
         paper's Figure 2 made quantitative. Every row applies the cost model that <code>sift \
         advise --workload FILE</code> applies to your workload (docs/advise.md): the Table 7b \
         operation mix (or one query shape) times the mean latencies of experiments 1–3 measured \
         on that attribute; where experiment 3 ran the mix, the row also says what it measured. \
         No constraint (uniqueness, read-your-writes) is applied here; <code>sift advise</code> \
         applies them.</p>",
    );
    if results.recommendations.is_empty() {
        out.push_str("<p>Not measured: run experiments 1–3.</p></section>");
        return;
    }
    out.push_str(
        "<table><tr><th class=\"text\">attribute</th><th class=\"text\">workload</th>\
         <th class=\"text\">choose</th><th>µs/op</th><th class=\"text\">runner-up</th><th>µs/op</th>\
         <th class=\"text\">why</th><th class=\"text\">basis</th></tr>",
    );
    for r in &results.recommendations {
        let chosen = r.best.as_deref().map_or_else(
            || "not measured".to_owned(),
            |b| {
                format!(
                    "<span class=\"swatch\" style=\"background:{}\"></span>{}",
                    colour(results, b),
                    escape(b)
                )
            },
        );
        let _ = write!(
            out,
            "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{chosen}</td><td>{}</td><td class=\"text\">{}</td><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
            escape(&r.attribute),
            escape(&r.workload),
            r.cost_us_per_op.map_or_else(|| "–".to_owned(), format_cell),
            escape(r.runner_up.as_deref().unwrap_or("–")),
            r.runner_up_cost_us_per_op.map_or_else(|| "–".to_owned(), format_cell),
            escape(&r.why),
            escape(&r.basis)
        );
    }
    out.push_str("</table></section>");
}

/// The whole page.
pub fn render(results: &StudyResults) -> String {
    let mut out = String::new();
    let machine = &results.machine;
    let configuration = &results.configuration;
    let _ =
        write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sift comparative \
         study</title><style>{STYLE}</style></head><body><h1>Sift comparative study</h1>\
         <p>Secondary-index configurations of Sift measured against the findings of LevelDB++ \
         (SIGMOD'18), NEXT (SIGMOD'25), Vinyl and Diff-Index. Preset <b>{}</b>, seed {}, {} \
         data, run {} on {} CPUs, {} {}, rustc {}, sift {} (commit {}).</p>",
        escape(&configuration.preset),
        configuration.seed,
        escape(&match (&configuration.data.path, configuration.data.documents) {
            (Some(path), Some(documents)) => {
                format!("{} ({path}, {documents} documents used)", configuration.data.source)
            }
            (Some(path), None) => format!("{} ({path})", configuration.data.source),
            (None, _) => configuration.data.source.clone(),
        }),
        escape(&machine.date_utc),
        machine.cpu_count,
        escape(&machine.os),
        escape(&machine.arch),
        escape(machine.rustc_version.as_deref().unwrap_or("unknown")),
        escape(&machine.sift_version),
        escape(machine.git_commit.as_deref().unwrap_or("unknown"))
    );
    out.push_str("<h3>Index configurations</h3><table><tr><th class=\"text\">configuration</th><th class=\"text\">colour</th><th class=\"text\">status</th></tr>");
    let _ = write!(
        out,
        "<tr><td class=\"text\">no index (baseline)</td><td class=\"text\"><span class=\"swatch\" style=\"background:{BASELINE_COLOUR}\"></span>{BASELINE_COLOUR}</td><td class=\"text\">experiment 1 only</td></tr>"
    );
    for c in &configuration.index_configurations {
        let _ = write!(
            out,
            "<tr><td class=\"text\">{}</td><td class=\"text\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td class=\"text\">{}</td></tr>",
            escape(&c.name),
            escape(&c.colour),
            escape(&c.colour),
            if c.known {
                "measured".to_owned()
            } else {
                escape(&c.note)
            }
        );
    }
    out.push_str("</table>");
    out.push_str("<h3>Scaled down from the paper</h3><ul>");
    for note in &configuration.scaled_down {
        let _ = write!(out, "<li>{}</li>", escape(note));
    }
    out.push_str("</ul>");
    let count = |outcome: &str| {
        results
            .experiments
            .iter()
            .flat_map(|e| &e.verdicts)
            .filter(|v| v.outcome == outcome)
            .count()
    };
    let _ = write!(
        out,
        "<p><b>Verdicts:</b> <span class=\"badge reproduced\">{} reproduced</span> \
         <span class=\"badge differs\">{} differ</span> <span class=\"badge not-measured\">{} not \
         measured</span></p><h3>Contents</h3><ol>",
        count("reproduced"),
        count("differs"),
        count("not-measured")
    );
    for id in ExperimentId::ALL {
        let _ = write!(
            out,
            "<li><a href=\"#experiment-{}\">{}</a></li>",
            id.id(),
            escape(id.title())
        );
    }
    out.push_str("<li><a href=\"#recommendations\">Recommendations</a></li></ol>");
    for id in ExperimentId::ALL {
        match results.experiments.iter().find(|e| e.id == id.id()) {
            Some(experiment) => section(&mut out, results, experiment),
            None => {
                let _ = write!(
                    out,
                    "<section id=\"experiment-{}\"><h2>{}. {}</h2><p><span class=\"badge \
                     not-measured\">not run</span> Not part of this report: run <code>sift study \
                     --only {}</code> with the same options to add it.</p></section>",
                    id.id(),
                    id.number(),
                    escape(id.title()),
                    id.id()
                );
            }
        }
    }
    recommendations(&mut out, results);
    out.push_str(
        "<p style=\"color:#777;font-size:12px\">Files: results.json (every measurement with \
         units, the configuration and the machine; schema docs/study-results.schema.json), one \
         CSV per experiment. Latencies are the time inside Sift's call (document generation not \
         included).</p></body></html>\n",
    );
    out
}

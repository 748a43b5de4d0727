//! `sift advise --workload FILE [--results study/results.json]`: the study's cost model applied
//! to a described or recorded workload (`sift_study::advise`; format in docs/advise.md).
//! Cost figures come from a study's results.json when given, otherwise from the built-in table.

use sift_study::advise::{advise, read_workload, render_text};
use sift_study::cost_model::CostTable;
use sift_study::results::StudyResults;
use std::path::{Path, PathBuf};

/// Options of `sift advise`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct AdviseArgs {
    /// The workload description: JSON with the operation mix and the attributes to index
    /// (docs/advise.md; example bench/advise-example.json).
    #[arg(long, required_unless_present = "print_costs")]
    pub workload: Option<PathBuf>,
    /// Cost figures from a `sift study` results.json (experiments 1–3) [default: the built-in
    /// figures, measured on this project's 2-core machine; `--print-costs` says which run].
    #[arg(long)]
    pub results: Option<PathBuf>,
    /// The advice as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print the cost figures in use (from --results or built in) as JSON and exit.
    #[arg(long)]
    pub print_costs: bool,
}

fn costs_from_results(path: &Path) -> Result<CostTable, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the results {}: {e}", path.display()))?;
    let results: StudyResults = serde_json::from_str(&text).map_err(|e| {
        format!(
            "results {}: not a `sift study` results.json: {e}",
            path.display()
        )
    })?;
    let source = format!(
        "{} (sift study --preset {}, {} documents, {} on {} CPUs, commit {})",
        path.display(),
        results.configuration.preset,
        results
            .configuration
            .sizes
            .get("documents")
            .map_or_else(|| "?".to_owned(), ToString::to_string),
        results.machine.date_utc,
        results.machine.cpu_count,
        results.machine.git_commit.as_deref().unwrap_or("unknown")
    );
    let table = CostTable::from_results(&results, &source);
    if table.entries.is_empty() {
        return Err(format!(
            "results {}: no PUT measurements of experiment 1; run `sift study --only \
             static,queries,mixed` first",
            path.display()
        ));
    }
    Ok(table)
}

/// Runs `sift advise`.
pub fn run(args: &AdviseArgs) -> Result<(), String> {
    let table = match &args.results {
        Some(path) => costs_from_results(path)?,
        None => CostTable::built_in()?,
    };
    if args.print_costs {
        let text = serde_json::to_string_pretty(&table).map_err(|e| e.to_string())?;
        println!("{text}");
        return Ok(());
    }
    let Some(path) = &args.workload else {
        return Err("--workload FILE is required".to_owned());
    };
    let workload = read_workload(path)?;
    let advice = advise(&workload, &table);
    if args.json {
        let value = serde_json::json!({
            "cost_source": table.source,
            "workload": workload,
            "advice": advice,
        });
        let text = serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        print!("{}", render_text(&workload, &table, &advice));
    }
    Ok(())
}

//! `sift study`: options, progress bars (indicatif, drawn on stderr only when it is a terminal)
//! and Ctrl-C handling around `sift_study::run_study`. The first Ctrl-C stops the study
//! at the next operation, keeps the experiments that finished and prints how to resume; a
//! second one exits at once.

use indicatif::{ProgressBar, ProgressStyle};
use sift_study::experiments::ExperimentId;
use sift_study::presets::Preset;
use sift_study::{run_study, IndexConfiguration, StudyOptions, StudyProgress, UserData};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Options of `sift study`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct StudyArgs {
    /// Size of the run: tiny (seconds, for CI), quick (200,000 documents per load, at most 5
    /// minutes on 2 cores), paper (500,000 documents per load, every experiment also at a tenth
    /// and a third of that; several hours on 2 cores).
    #[arg(long, default_value = "quick")]
    pub preset: String,
    /// Documents per load, overriding the preset (the other phases scale with it).
    #[arg(long)]
    pub n: Option<u64>,
    /// Experiments to run, comma-separated: static, queries, mixed, bloom-compression, next,
    /// vinyl, diff-index (or 1–7) [default: all]. Results of an earlier run of the same setup
    /// in --out are kept for the others.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Output folder: index.html, results.json, one CSV per experiment.
    #[arg(long, default_value = "study")]
    pub out: PathBuf,
    /// Index configurations, comma-separated `kind[:maintenance]` [default: every kind and
    /// maintenance of this build]. Unknown ones are reported as not measured.
    #[arg(long, value_delimiter = ',')]
    pub configs: Vec<String>,
    /// Your own data instead of the tweet generator: a JSON Lines file.
    #[arg(long, requires_all = ["pk", "attr"])]
    pub data: Option<PathBuf>,
    /// With --data: the primary-key field.
    #[arg(long, requires = "data")]
    pub pk: Option<String>,
    /// With --data: an attribute to index, `path:type` (int or time); one or two.
    #[arg(long, requires = "data")]
    pub attr: Vec<String>,
    /// Seed of the generated data and the queries.
    #[arg(long, default_value_t = 301)]
    pub seed: u64,
}

impl StudyArgs {
    pub fn options(&self) -> Result<StudyOptions, String> {
        let preset: Preset = self.preset.parse().map_err(|e| format!("--preset: {e}"))?;
        let mut options = StudyOptions::new(preset, self.out.clone());
        options.documents = self.n;
        options.seed = self.seed;
        for text in &self.only {
            let id: ExperimentId = text.trim().parse().map_err(|e| format!("--only: {e}"))?;
            if !options.only.contains(&id) {
                options.only.push(id);
            }
        }
        if !self.configs.is_empty() {
            options.configurations = self
                .configs
                .iter()
                .map(|text| text.parse::<IndexConfiguration>())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("--configs: {e}"))?;
        }
        if let Some(path) = &self.data {
            options.data = Some(UserData {
                path: path.clone(),
                primary_key: self.pk.clone().unwrap_or_default(),
                attributes: self.attr.clone(),
            });
        }
        Ok(options)
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_signal: libc::c_int) {
    if INTERRUPTED.swap(true, Ordering::SeqCst) {
        // Second Ctrl-C: leave now.
        // SAFETY: `_exit` is async-signal-safe and takes no pointer.
        unsafe { libc::_exit(130) };
    }
}

fn install_interrupt_handler() {
    let handler: extern "C" fn(libc::c_int) = on_interrupt;
    // SAFETY: the handler only touches an atomic and calls _exit, both async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
    }
}

/// Progress bars on stderr (hidden when stderr is not a terminal) and experiment lines.
struct Bars {
    bar: Mutex<Option<ProgressBar>>,
    started: Instant,
}

impl Bars {
    fn print(&self, line: &str) {
        let guard = self
            .bar
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match guard.as_ref() {
            Some(bar) if !bar.is_hidden() => bar.println(line),
            _ => eprintln!("{line}"),
        }
    }
}

impl StudyProgress for Bars {
    fn experiment(&self, number: u32, title: &str) {
        self.print(&format!(
            "[{:>6.1} s] experiment {number}: {title}",
            self.started.elapsed().as_secs_f64()
        ));
    }

    fn phase(&self, label: &str, total: u64, unit: &str) {
        let bar = ProgressBar::new(total);
        let template = format!(
            "{{msg:48!}} [{{bar:28}}] {{human_pos}}/{{human_len}} {unit} {{per_sec}} ETA {{eta}}"
        );
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(label.to_owned());
        let mut guard = self
            .bar
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(old) = guard.take() {
            old.finish_and_clear();
        }
        *guard = Some(bar);
    }

    fn advance(&self, steps: u64) {
        let guard = self
            .bar
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(bar) = guard.as_ref() {
            bar.inc(steps);
        }
    }

    fn phase_done(&self) {
        let mut guard = self
            .bar
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(bar) = guard.take() {
            bar.finish_and_clear();
        }
    }

    fn message(&self, text: &str) {
        self.print(text);
    }
}

/// Runs `sift study`.
pub fn study(args: &StudyArgs) -> Result<(), String> {
    let options = args.options()?;
    install_interrupt_handler();
    let bars = Bars {
        bar: Mutex::new(None),
        started: Instant::now(),
    };
    eprintln!(
        "sift study: preset {}, {} configurations, writing {} (Ctrl-C keeps finished experiments)",
        options.preset,
        options.configurations.len(),
        options.out.display()
    );
    let outcome = run_study(&options, &bars, &INTERRUPTED).map_err(|e| e.to_string())?;
    bars.phase_done();
    let finished: Vec<&str> = outcome.finished.iter().map(|id| id.id()).collect();
    eprintln!(
        "finished in {:.1} s: {}; report: {}",
        outcome.seconds,
        if finished.is_empty() {
            "no experiment".to_owned()
        } else {
            finished.join(", ")
        },
        outcome.out.join("index.html").display()
    );
    if let Some(hint) = outcome.resume_hint(&options) {
        return Err(format!(
            "interrupted; the finished experiments are in {}. Resume with:\n  {hint}",
            outcome.out.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: StudyArgs,
    }

    fn parse(arguments: &[&str]) -> Result<StudyArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("study").chain(arguments.iter().copied()))
            .map(|cli| cli.args)
    }

    #[test]
    fn options_from_arguments() {
        let options = parse(&[]).unwrap().options().unwrap();
        assert_eq!(options.preset, Preset::Quick);
        assert_eq!(options.out, PathBuf::from("study"));
        assert!(options.only.is_empty() && options.data.is_none());
        assert!(options.configurations.len() >= 4);
        let options = parse(&[
            "--preset",
            "tiny",
            "--only",
            "static,3",
            "--configs",
            "lazy,embedded:sync-full",
            "--n",
            "77",
            "--out",
            "x",
        ])
        .unwrap()
        .options()
        .unwrap();
        assert_eq!(
            options.only,
            vec![ExperimentId::Static, ExperimentId::Mixed]
        );
        assert_eq!(options.configurations.len(), 2);
        assert_eq!(options.documents, Some(77));
        assert!(parse(&["--preset", "huge"]).unwrap().options().is_err());
        assert!(parse(&["--only", "sixth"]).unwrap().options().is_err());
        // --data needs --pk and --attr, and they need --data.
        assert!(parse(&["--data", "f.jsonl"]).is_err());
        assert!(parse(&["--pk", "id"]).is_err());
        let options = parse(&["--data", "f.jsonl", "--pk", "id", "--attr", "a:int"])
            .unwrap()
            .options()
            .unwrap();
        assert_eq!(options.data.unwrap().attributes, vec!["a:int".to_owned()]);
    }
}

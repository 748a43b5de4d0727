//! Measures what one `Database::put` costs the writer thread with no secondary index and with
//! an `async-simple` one (the enqueue path): alternating rounds, wall time per put and the
//! writer thread's CPU time per put. Run under `valgrind --tool=callgrind
//! --toggle-collect=write_path_cost::measured_put` to count the writer's instructions per put.
//!
//! Usage: `write_path_cost [none|async-simple|both] [puts per round] [rounds]`.

#![allow(clippy::cast_precision_loss)] // nanosecond figures printed as floats

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{AttrType, Database, DatabaseOptions, IndexKind, IndexSpec, Maintenance, WriteOp};
use std::time::Instant;

const DOCUMENTS: u64 = 20_000;

fn document(rng: &mut StdRng, key: u64, value: u32) -> Vec<u8> {
    let mut text = format!("{{\"id\":{key},\"price\":{value},\"title\":\"");
    let pad = 200usize.saturating_sub(text.len() + 2);
    for _ in 0..pad {
        text.push(char::from(b'a' + rng.gen_range(0..26u8)));
    }
    text.push_str("\"}");
    text.into_bytes()
}

/// CPU time of the calling thread, in nanoseconds (Linux: `/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

type Outcome<T> = Result<T, Box<dyn std::error::Error>>;

fn open(scheme: &str) -> Outcome<(tempfile::TempDir, Database)> {
    let dir = tempfile::tempdir()?;
    let mut options = DatabaseOptions::default();
    options.engine.memtable_bytes_max = 64 << 20;
    let database = Database::open(dir.path(), options)?;
    database.create_collection("items", "id")?;
    if scheme == "async-simple" {
        let spec = IndexSpec::new("price", "price", AttrType::Int, IndexKind::Composite)
            .with_maintenance(Maintenance::AsyncSimple);
        database.create_index("items", spec)?;
    }
    let mut rng = StdRng::seed_from_u64(7);
    for start in (1..=DOCUMENTS).step_by(1000) {
        let docs: Vec<Vec<u8>> = (start..start + 1000)
            .map(|k| {
                let value = rng.gen_range(0..1_000_000);
                document(&mut rng, k, value)
            })
            .collect();
        let ops: Vec<WriteOp<'_>> = docs.iter().map(|d| WriteOp::Put(d)).collect();
        database.write("items", &ops)?;
    }
    database.wait_until_indexed()?;
    Ok((dir, database))
}

/// (wall ns per put (mean), wall ns per put (p50), writer CPU ns per put).
fn round(database: &Database, puts: usize, seed: u64) -> Outcome<(f64, f64, f64)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let docs: Vec<Vec<u8>> = (0..puts)
        .map(|_| {
            let key = rng.gen_range(1..=DOCUMENTS);
            let value = rng.gen_range(0..1_000_000);
            document(&mut rng, key, value)
        })
        .collect();
    let mut samples = Vec::with_capacity(puts);
    let cpu_before = thread_cpu_ns();
    for doc in &docs {
        let started = Instant::now();
        measured_put(database, doc)?;
        samples.push(started.elapsed().as_nanos() as f64);
        // Spaced writes (an open-loop load below saturation): let the worker run between them.
        let pause = Instant::now();
        while pause.elapsed().as_nanos() < 2_000 {
            std::hint::spin_loop();
        }
    }
    let cpu_after = thread_cpu_ns();
    let mean = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
    samples.sort_by(f64::total_cmp);
    let spin_ns = 2_000.0;
    let p50 = samples.get(samples.len() / 2).copied().unwrap_or(0.0);
    // The spin after each put is counted in full (it runs at least `spin_ns`): an estimate.
    let cpu = cpu_after.saturating_sub(cpu_before) as f64 / puts.max(1) as f64 - spin_ns;
    Ok((mean, p50, cpu))
}

/// The measured call (not inlined, so callgrind can collect only inside it:
/// `--toggle-collect=write_path_cost::measured_put`).
#[inline(never)]
fn measured_put(database: &Database, doc: &[u8]) -> Outcome<()> {
    database.put("items", doc)?;
    Ok(())
}

fn main() -> Outcome<()> {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map_or("both", String::as_str);
    let puts: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let rounds: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(3);
    let schemes: Vec<&str> = match which {
        "both" => vec!["none", "async-simple"],
        one => vec![one],
    };
    let mut opened = Vec::new();
    for scheme in schemes {
        opened.push((scheme, open(scheme)?));
    }
    for r in 0..rounds {
        for (scheme, (_, database)) in &opened {
            let (mean, p50, cpu) = round(database, puts, r + 1)?;
            println!(
                "round {r} {scheme:>12}: wall mean {mean:7.0} ns, p50 {p50:7.0} ns, writer cpu ~{cpu:7.0} ns/put"
            );
        }
    }
    for (_, (_, database)) in &opened {
        database.wait_until_indexed()?;
    }
    Ok(())
}

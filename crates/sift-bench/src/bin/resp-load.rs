//! `resp-load`: a small RESP load driver for `bench/compare-search.sh`. It sends a command
//! template to any Redis-protocol server from several connections, pipelined, and reports
//! requests per second, batch latency and what the replies held (errors, the mean of a
//! search's first integer — its total — so two servers can be checked to answer alike).
//!
//!     resp-load --port P [--connections 50] [--pipeline 16] (--requests N | --seconds S)
//!               [--seed 1] [--sequential] -- WORD WORD …
//!
//! Placeholders in the words: `{i}` the request number (from 0, across connections),
//! `{rand:N}` a random integer below N, `{rand:N+W}` the same random integer plus W (the
//! upper end of a range starting at the previous `{rand:N}`).

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis_protocol::resp2::decode::decode;
use redis_protocol::resp2::types::OwnedFrame;

#[derive(Parser, Debug, Clone)]
#[command(about = "Pipelined RESP load from several connections")]
struct Args {
    #[arg(long, default_value_t = 6379)]
    port: u16,
    #[arg(long, default_value_t = 50)]
    connections: usize,
    #[arg(long, default_value_t = 16)]
    pipeline: usize,
    /// Total requests (split across connections).
    #[arg(long)]
    requests: Option<u64>,
    /// Run for this long instead.
    #[arg(long)]
    seconds: Option<f64>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The command, with placeholders.
    #[arg(last = true, required = true)]
    words: Vec<String>,
}

#[derive(Debug, Clone)]
enum Part {
    Text(String),
    Index,
    Random(u64),
    /// The last random value plus this.
    LastPlus(u64),
}

fn parse_word(word: &str) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    let mut rest = word;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        let inside = &rest[open + 1..close];
        let part = if inside == "i" {
            Part::Index
        } else if let Some(spec) = inside.strip_prefix("rand:") {
            match spec.split_once('+') {
                Some((_, plus)) => Part::LastPlus(plus.parse().map_err(|_| format!("bad {word}"))?),
                None => Part::Random(spec.parse().map_err(|_| format!("bad {word}"))?),
            }
        } else {
            rest = &rest[close + 1..];
            parts.push(Part::Text(format!("{{{inside}}}")));
            continue;
        };
        if open > 0 {
            parts.push(Part::Text(rest[..open].to_owned()));
        }
        parts.push(part);
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Text(rest.to_owned()));
    }
    Ok(parts)
}

fn render(template: &[Vec<Part>], index: u64, rng: &mut StdRng, out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", template.len()).as_bytes());
    let mut last = 0u64;
    let mut word = String::new();
    for parts in template {
        word.clear();
        for part in parts {
            match part {
                Part::Text(text) => word.push_str(text),
                Part::Index => word.push_str(&index.to_string()),
                Part::Random(below) => {
                    last = rng.gen_range(0..*below);
                    word.push_str(&last.to_string());
                }
                Part::LastPlus(plus) => word.push_str(&(last + plus).to_string()),
            }
        }
        out.extend_from_slice(format!("${}\r\n{word}\r\n", word.len()).as_bytes());
    }
}

#[derive(Default)]
struct Totals {
    replies: AtomicU64,
    errors: AtomicU64,
    /// Sum of the first integer of array replies (a search's total).
    first_integer_sum: AtomicU64,
    arrays: AtomicU64,
}

/// Counts a reply: errors (the first is printed), and a search's total.
fn count_reply(frame: &OwnedFrame, totals: &Totals) {
    totals.replies.fetch_add(1, Ordering::Relaxed);
    match frame {
        OwnedFrame::Error(text) if totals.errors.fetch_add(1, Ordering::Relaxed) == 0 => {
            eprintln!("resp-load: first error reply: {text}");
        }
        OwnedFrame::Array(items) => {
            if let Some(OwnedFrame::Integer(total)) = items.first() {
                totals
                    .first_integer_sum
                    .fetch_add(u64::try_from(*total).unwrap_or(0), Ordering::Relaxed);
                totals.arrays.fetch_add(1, Ordering::Relaxed);
            }
        }
        _ => {}
    }
}

fn main() {
    let args = Args::parse();
    let template: Vec<Vec<Part>> = match args.words.iter().map(|w| parse_word(w)).collect() {
        Ok(template) => template,
        Err(error) => {
            eprintln!("resp-load: {error}");
            std::process::exit(2);
        }
    };
    let template = Arc::new(template);
    let totals = Arc::new(Totals::default());
    let next_index = Arc::new(AtomicU64::new(0));
    let limit = args.requests;
    let deadline = args.seconds.map(Duration::from_secs_f64);
    let started = Instant::now();
    let mut threads = Vec::new();
    for connection in 0..args.connections {
        let (template, totals, next_index, args) = (
            Arc::clone(&template),
            Arc::clone(&totals),
            Arc::clone(&next_index),
            args.clone(),
        );
        threads.push(std::thread::spawn(move || -> Result<Vec<u64>, String> {
            let mut rng =
                StdRng::seed_from_u64(args.seed.wrapping_mul(1000).wrapping_add(connection as u64));
            let mut stream =
                TcpStream::connect(("127.0.0.1", args.port)).map_err(|e| e.to_string())?;
            stream.set_nodelay(true).map_err(|e| e.to_string())?;
            let mut latencies_us = Vec::new();
            let mut request = Vec::new();
            let mut buffer: Vec<u8> = Vec::new();
            let mut chunk = vec![0u8; 256 * 1024];
            loop {
                if deadline.is_some_and(|d| started.elapsed() >= d) {
                    break;
                }
                request.clear();
                let mut sent = 0;
                for _ in 0..args.pipeline {
                    let index = next_index.fetch_add(1, Ordering::Relaxed);
                    if limit.is_some_and(|l| index >= l) {
                        break;
                    }
                    render(&template, index, &mut rng, &mut request);
                    sent += 1;
                }
                if sent == 0 {
                    break;
                }
                let batch_started = Instant::now();
                stream.write_all(&request).map_err(|e| e.to_string())?;
                let mut received = 0;
                while received < sent {
                    if let Some((frame, used)) =
                        decode(&buffer).map_err(|e| format!("bad reply: {e:?}"))?
                    {
                        buffer.drain(..used);
                        received += 1;
                        count_reply(&frame, &totals);
                    } else {
                        let read = stream.read(&mut chunk).map_err(|e| e.to_string())?;
                        if read == 0 {
                            return Err("the server closed the connection".to_owned());
                        }
                        buffer.extend_from_slice(&chunk[..read]);
                    }
                }
                latencies_us.push(batch_started.elapsed().as_micros() as u64);
            }
            Ok(latencies_us)
        }));
    }
    let mut latencies_us = Vec::new();
    for thread in threads {
        match thread.join() {
            Ok(Ok(mut batch)) => latencies_us.append(&mut batch),
            Ok(Err(error)) => {
                eprintln!("resp-load: {error}");
                std::process::exit(1);
            }
            Err(_) => {
                eprintln!("resp-load: a connection thread panicked");
                std::process::exit(1);
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    latencies_us.sort_unstable();
    let percentile = |p: f64| {
        latencies_us
            .get(((latencies_us.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0)
    };
    let replies = totals.replies.load(Ordering::Relaxed);
    let arrays = totals.arrays.load(Ordering::Relaxed);
    println!(
        "{}",
        serde_json::json!({
            "requests": replies,
            "seconds": sift_bench::round_to(seconds, 3),
            "requests_per_sec": sift_bench::round_to(replies as f64 / seconds, 0),
            "errors": totals.errors.load(Ordering::Relaxed),
            "batch_latency_us_p50": percentile(0.5),
            "batch_latency_us_p99": percentile(0.99),
            "mean_first_integer": if arrays == 0 { 0.0 } else {
                sift_bench::round_to(totals.first_integer_sum.load(Ordering::Relaxed) as f64 / arrays as f64, 2)
            },
        })
    );
}

//! The load generator: one database per scheme, preloaded, then closed-loop saturation,
//! open-loop load steps with latencies from the scheduled time, and the read phase.

use super::args::RateBasis;
use super::args::Scheme;
use super::args::Settings;
use super::index_error;
use super::results::HalfLoad;
use super::results::Lag;
use super::results::Latency;
use super::results::LoadStep;
use super::results::RangeReads;
use super::results::Reads;
use super::results::Saturation;
use super::results::SchemeResult;
use super::targets::TARGETS;
use super::COLLECTION;
use super::INDEXED_PATH;
use super::PRELOAD_BATCH_DOCUMENTS;
use super::VALUE_DOMAIN;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_bench::kv::BenchError;
use sift_bench::noise::spin_gaps::wait_until;
use sift_bench::noise::spin_gaps::SpinGaps;
use sift_bench::pinning::pin_client;
use sift_index::{AttrType, AttrValue, Database, IndexSpec, Maintenance, Session, WriteOp};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Told where the run is; an error stops it (Ctrl-C in the study).
pub type Progress<'a> = &'a mut dyn FnMut(&str) -> Result<(), BenchError>;

/// A document: `{"id":K,"price":V,"title":"…"}` padded to about `bytes`.
pub fn document(rng: &mut StdRng, key: u64, value: u32, bytes: usize) -> Vec<u8> {
    let mut text = format!("{{\"id\":{key},\"price\":{value},\"title\":\"");
    let pad = bytes.saturating_sub(text.len() + 2).max(1);
    for _ in 0..pad {
        text.push(char::from(b'a' + rng.gen_range(0..26u8)));
    }
    text.push_str("\"}");
    text.into_bytes()
}

/// What a query found: (hits, candidates examined, stale entries met).
pub(crate) type QueryCounts = (u64, u64, u64);

/// Where a client writes and reads: the database, or its session (async-session).
pub(crate) enum Client<'a> {
    Direct(&'a Database),
    Session(Session<'a>),
}

impl Client<'_> {
    pub(crate) fn put(&self, json: &[u8]) -> Result<(), BenchError> {
        match self {
            Client::Direct(database) => database.put(COLLECTION, json),
            Client::Session(session) => session.put(COLLECTION, json),
        }
        .map(|_| ())
        .map_err(index_error("update"))
    }

    /// (hits, candidates examined, stale entries met).
    pub(crate) fn range(&self, lo: i64, hi: i64) -> Result<QueryCounts, BenchError> {
        let (lo, hi) = (AttrValue::Int(lo), AttrValue::Int(hi));
        let (hits, stats) = match self {
            Client::Direct(database) => database
                .range(COLLECTION, INDEXED_PATH, &lo, &hi, None)
                .map(|r| (r.hits.len(), r.stats)),
            Client::Session(session) => session
                .range(COLLECTION, INDEXED_PATH, &lo, &hi, None)
                .map(|r| (r.hits.len(), r.stats)),
        }
        .map_err(index_error("range"))?;
        Ok((hits as u64, stats.candidates_examined, stats.stale_entries))
    }

    pub(crate) fn lookup(&self, value: i64) -> Result<QueryCounts, BenchError> {
        let value = AttrValue::Int(value);
        let (hits, stats) = match self {
            Client::Direct(database) => database
                .lookup(COLLECTION, INDEXED_PATH, &value, None)
                .map(|r| (r.hits.len(), r.stats)),
            Client::Session(session) => session
                .lookup(COLLECTION, INDEXED_PATH, &value, None)
                .map(|r| (r.hits.len(), r.stats)),
        }
        .map_err(index_error("lookup"))?;
        Ok((hits as u64, stats.candidates_examined, stats.stale_entries))
    }
}

pub(crate) fn client_for(database: &Database, scheme: Scheme) -> Client<'_> {
    if scheme == Scheme::Maintained(Maintenance::AsyncSession) {
        Client::Session(database.session())
    } else {
        Client::Direct(database)
    }
}

/// What one open-loop schedule did.
pub(crate) struct Schedule {
    pub(crate) scheduled: u64,
    pub(crate) unissued: u64,
    /// Over all clients.
    pub(crate) spin_gaps: SpinGaps,
    /// From the scheduled time, and from the call, to the acknowledgement (µs).
    pub(crate) latencies: Vec<f64>,
    pub(crate) services: Vec<f64>,
    pub(crate) elapsed_s: f64,
}

/// The database of one scheme with its documents' current indexed values.
pub(crate) struct Bench<'a> {
    pub(crate) settings: &'a Settings,
    pub(crate) scheme: Scheme,
    pub(crate) database: Database,
    /// Current `price` of document `id` at index `id - 1`.
    pub(crate) values: Vec<AtomicU32>,
    /// False for the no-index database opened only for its saturation (the rates' basis).
    pub(crate) measured: bool,
}

/// How long the machine-noise meter spins before and after the load steps.
pub(crate) const HICCUP_METER_DURATION: Duration = Duration::from_secs(1);

/// Names of [`Bench::writer_wait_counters`], in order (µs: microseconds).
pub(crate) const WRITER_WAIT_COUNTERS: [&str; 16] = [
    "stalls",
    "stall_us",
    "state_lock_wait_us",
    "switches",
    "switch_us",
    "switch_sync_us",
    "commit_waits",
    "commit_wait_us",
    "unqueued_commits",
    "unqueued_commit_us",
    "unqueued_syncs",
    "manifest_writes",
    "manifest_us",
    "drain_us",
    "closed_log_sync_by_writer_us",
    "closed_log_sync_bg_us",
];

/// How many other processes the report names (by the CPU time they used during the steps).
pub(crate) const OTHER_PROCESSES_LISTED: usize = 5;

/// A call at least this long (µs) is counted as slow in the target steps' progress lines.
pub(crate) const SLOW_CALL_US: f64 = 20.0;

/// Time a client must have before an update is due to read its context-switch count first (a
/// read is a system call: 0.14 µs on the 2-core development machine, where the sync-insert
/// target leaves a client about 3.5 µs between updates).
pub(crate) const SWITCH_READ_SLACK: Duration = Duration::from_micros(1);

pub(crate) fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

impl Bench<'_> {
    /// Opens a fresh database in `dir`, creates the index (unless none) and preloads.
    pub(crate) fn open<'a>(
        settings: &'a Settings,
        scheme: Scheme,
        dir: &Path,
        progress: Progress<'_>,
    ) -> Result<Bench<'a>, BenchError> {
        let database =
            Database::open(dir, settings.options.clone()).map_err(index_error("open"))?;
        database
            .create_collection(COLLECTION, "id")
            .map_err(index_error("create collection"))?;
        if let Scheme::Maintained(maintenance) = scheme {
            let spec = IndexSpec::new(INDEXED_PATH, INDEXED_PATH, AttrType::Int, settings.kind)
                .with_maintenance(maintenance);
            database
                .create_index(COLLECTION, spec)
                .map_err(index_error("create index"))?;
        }
        let mut rng = StdRng::seed_from_u64(settings.seed);
        let mut values = Vec::with_capacity(settings.documents as usize);
        let mut key = 1;
        while key <= settings.documents {
            let end = (key + PRELOAD_BATCH_DOCUMENTS).min(settings.documents + 1);
            let docs: Vec<Vec<u8>> = (key..end)
                .map(|k| {
                    let value = rng.gen_range(0..VALUE_DOMAIN);
                    values.push(AtomicU32::new(value));
                    document(&mut rng, k, value, settings.document_bytes)
                })
                .collect();
            let ops: Vec<WriteOp<'_>> = docs.iter().map(|d| WriteOp::Put(d)).collect();
            database
                .write(COLLECTION, &ops)
                .map_err(index_error("preload"))?;
            key = end;
            if key % (PRELOAD_BATCH_DOCUMENTS * 20) == 1 {
                progress(&format!("{}: preloaded {}", scheme.name(), key - 1))?;
            }
        }
        let bench = Bench {
            settings,
            scheme,
            database,
            values,
            measured: true,
        };
        bench.settle()?;
        Ok(bench)
    }

    /// Flushes, waits for the index queue and background work.
    pub(crate) fn settle(&self) -> Result<(), BenchError> {
        self.database.flush().map_err(index_error("flush"))?;
        self.drain()?;
        self.database
            .engine()
            .wait_for_background_work()
            .map_err(|e| BenchError::new(format!("background work: {e}")))
    }

    /// Waits until every asynchronous index update is applied.
    pub(crate) fn drain(&self) -> Result<(), BenchError> {
        self.database
            .wait_until_indexed()
            .map_err(index_error("wait until indexed"))
    }

    pub(crate) fn lag_histogram(&self) -> Vec<(u64, u64)> {
        self.database.async_index_stats().lag_histogram
    }

    /// The next update of a client: (key, new value, document).
    pub(crate) fn next_update(&self, rng: &mut StdRng) -> (u64, u32, Vec<u8>) {
        let key = rng.gen_range(1..=self.settings.documents);
        let value = rng.gen_range(0..VALUE_DOMAIN);
        let json = document(rng, key, value, self.settings.document_bytes);
        (key, value, json)
    }

    pub(crate) fn apply(
        &self,
        client: &Client<'_>,
        key: u64,
        value: u32,
        json: &[u8],
    ) -> Result<(), BenchError> {
        client.put(json)?;
        self.values[(key - 1) as usize].store(value, Ordering::Relaxed);
        Ok(())
    }

    /// Closed loop for `seconds`: (updates, elapsed, latencies in µs).
    pub(crate) fn saturate(&self, phase_seed: u64) -> Result<Saturation, BenchError> {
        let clients = self.settings.clients;
        let stop = AtomicBool::new(false);
        let done = AtomicU64::new(0);
        let started = Instant::now();
        let outcomes: Vec<Result<Vec<f64>, BenchError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..clients)
                .map(|c| {
                    let (stop, done) = (&stop, &done);
                    scope.spawn(move || -> Result<Vec<f64>, BenchError> {
                        pin_client(self.settings.client_cpus.as_deref())?;
                        let client = client_for(&self.database, self.scheme);
                        let mut rng = StdRng::seed_from_u64(phase_seed ^ ((c as u64 + 1) << 40));
                        let mut latencies = Vec::new();
                        while !stop.load(Ordering::Relaxed) {
                            let (key, value, json) = self.next_update(&mut rng);
                            let begun = Instant::now();
                            self.apply(&client, key, value, &json)?;
                            latencies.push(micros(begun.elapsed()));
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(latencies)
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_secs_f64(self.settings.saturation_seconds));
            stop.store(true, Ordering::Relaxed);
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(BenchError::new("a client thread panicked")))
                })
                .collect()
        });
        let elapsed = started.elapsed();
        let mut latencies = Vec::new();
        for outcome in outcomes {
            latencies.extend(outcome?);
        }
        let drain_started = Instant::now();
        self.drain()?;
        let drain = drain_started.elapsed();
        let updates = done.load(Ordering::Relaxed);
        Ok(Saturation {
            updates,
            acknowledged_rate: updates as f64 / elapsed.as_secs_f64(),
            sustained_rate: updates as f64 / (elapsed + drain).as_secs_f64(),
            drain_ms: drain.as_secs_f64() * 1e3,
            latency: Latency::of(&mut latencies),
        })
    }

    /// Counters sampled around a step: (engine write stalls, their µs, flush drains, their µs).
    pub(crate) fn stall_counters(&self) -> [u64; 4] {
        let engine = self.database.engine().stats();
        let index = self.database.async_index_stats();
        [
            engine.write_stalls,
            engine.write_stall_micros,
            index.flush_drains,
            index.flush_drain_wait_us,
        ]
    }

    /// Where writers waited (see [`WRITER_WAIT_COUNTERS`]), sampled around a target step.
    pub(crate) fn writer_wait_counters(&self) -> [u64; 16] {
        let engine = self.database.engine().stats();
        let index = self.database.async_index_stats();
        [
            engine.write_stalls,
            engine.write_stall_micros,
            engine.write_state_lock_wait_micros,
            engine.memtable_switches,
            engine.memtable_switch_micros,
            engine.memtable_switch_wal_sync_micros,
            engine.commit_lock_waits,
            engine.commit_lock_wait_micros,
            engine.unqueued_commits,
            engine.unqueued_commit_micros,
            engine.unqueued_commit_syncs,
            engine.manifest_writes,
            engine.manifest_write_micros,
            index.flush_drain_wait_us,
            engine.closed_wal_sync_by_writer_micros,
            engine.closed_wal_sync_micros,
        ]
    }

    /// One open-loop step at `rate` updates per second.
    pub(crate) fn open_loop(
        &self,
        load_percent: f64,
        rate: f64,
        phase_seed: u64,
    ) -> Result<LoadStep, BenchError> {
        let lag_before = self.lag_histogram();
        let counters_before = self.stall_counters();
        let mut run = self.run_schedule(rate, phase_seed)?;
        let queue_length_at_end = self.database.async_index_stats().queue_length;
        let drain_started = Instant::now();
        self.drain()?;
        let drain_ms = drain_started.elapsed().as_secs_f64() * 1e3;
        let lag = self
            .scheme
            .is_async()
            .then(|| Lag::between(&lag_before, &self.lag_histogram()));
        let counters = self.stall_counters();
        let delta = |i: usize| counters[i].saturating_sub(counters_before[i]);
        self.database
            .engine()
            .wait_for_background_work()
            .map_err(|e| BenchError::new(format!("background work: {e}")))?;
        let completed = run.scheduled - run.unissued;
        Ok(LoadStep {
            load_percent,
            offered_rate: rate,
            achieved_rate: completed as f64 / run.elapsed_s.max(1e-9),
            scheduled: run.scheduled,
            unissued: run.unissued,
            latency: Latency::of(&mut run.latencies),
            service: Latency::of(&mut run.services),
            lag,
            queue_length_at_end,
            drain_ms,
            write_stalls: delta(0),
            write_stall_ms: delta(1) as f64 / 1e3,
            flush_drains: delta(2),
            flush_drain_wait_ms: delta(3) as f64 / 1e3,
        })
    }

    /// The updates of one open-loop step at `rate` per second, as scheduled (no drain).
    pub(crate) fn run_schedule(&self, rate: f64, phase_seed: u64) -> Result<Schedule, BenchError> {
        let clients = self.settings.clients;
        let seconds = self.settings.step_seconds;
        let scheduled_total = (rate * seconds).round().max(1.0) as u64;
        let interval_s = 1.0 / rate.max(1e-9);
        // The clients stop issuing a step behind schedule (at least one second).
        let grace = Duration::from_secs_f64(seconds.max(1.0));
        let start = Instant::now() + Duration::from_millis(2);
        let end_of_schedule = start + Duration::from_secs_f64(seconds);
        let hard_stop = end_of_schedule + grace;
        type Outcome = Result<(Vec<f64>, Vec<f64>, u64, SpinGaps), BenchError>;
        let outcomes: Vec<Outcome> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..clients)
                .map(|c| {
                    scope.spawn(move || -> Outcome {
                        pin_client(self.settings.client_cpus.as_deref())?;
                        let client = client_for(&self.database, self.scheme);
                        let mut rng = StdRng::seed_from_u64(phase_seed ^ ((c as u64 + 1) << 40));
                        let mut latencies = Vec::new();
                        let mut services = Vec::new();
                        let mut unissued = 0;
                        let mut spin_gaps = SpinGaps::default();
                        let mut i = c as u64;
                        while i < scheduled_total {
                            let scheduled = start + Duration::from_secs_f64(i as f64 * interval_s);
                            let (key, value, json) = self.next_update(&mut rng);
                            // Read only with time to spare before the update is due, so a
                            // client behind schedule does not pay for it (it then stays unknown).
                            let switches = (Instant::now() + SWITCH_READ_SLACK < scheduled)
                                .then(sift_bench::noise::thread_context_switches)
                                .flatten();
                            wait_until(scheduled, &mut spin_gaps);
                            let now = Instant::now();
                            if now >= hard_stop {
                                // Too far behind: the rest waited at least until now.
                                let mut j = i;
                                while j < scheduled_total {
                                    let at = start + Duration::from_secs_f64(j as f64 * interval_s);
                                    latencies.push(micros(now.saturating_duration_since(at)));
                                    unissued += 1;
                                    j += clients as u64;
                                }
                                break;
                            }
                            self.apply(&client, key, value, &json)?;
                            let done = Instant::now();
                            let service = done.saturating_duration_since(now);
                            // After the clock: outside the timed call.
                            spin_gaps.note_call(
                                service,
                                switches,
                                sift_bench::noise::thread_context_switches,
                            );
                            latencies.push(micros(done.saturating_duration_since(scheduled)));
                            services.push(micros(service));
                            i += clients as u64;
                        }
                        Ok((latencies, services, unissued, spin_gaps))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(BenchError::new("a client thread panicked")))
                })
                .collect()
        });
        let finished = Instant::now();
        let mut latencies = Vec::new();
        let mut services = Vec::new();
        let mut unissued = 0;
        let mut spin_gaps = SpinGaps::default();
        for outcome in outcomes {
            let (mut these, mut their_services, missed, gaps) = outcome?;
            latencies.append(&mut these);
            services.append(&mut their_services);
            unissued += missed;
            spin_gaps.merge(gaps);
        }
        Ok(Schedule {
            scheduled: scheduled_total,
            unissued,
            spin_gaps,
            latencies,
            services,
            elapsed_s: finished.saturating_duration_since(start).as_secs_f64(),
        })
    }

    /// The target comparison of this scheme against `baseline` (no index), both offered half of
    /// `saturation_rate`: `repeats` pairs of steps, alternating which side runs first.
    pub(crate) fn half_load(
        &self,
        baseline: &Bench<'_>,
        saturation_rate: f64,
        target: u64,
        progress: Progress<'_>,
    ) -> Result<HalfLoad, BenchError> {
        let rate = (saturation_rate / 2.0).max(1.0);
        let repeats = self.settings.target_repeats.max(1);
        let mut ours = (Vec::new(), Vec::new(), 0, 0);
        let mut theirs = (Vec::new(), Vec::new(), 0, 0);
        let mut repeat_means_us = Vec::new();
        let mut repeat_client_gaps_ms = Vec::new();
        let mut repeat_unswitched_calls = Vec::new();
        // Latencies of the repeats in which neither client was hit by a machine pause.
        let mut clean = (Vec::new(), Vec::new(), 0u32);
        let mut drains = (0, 0);
        for repeat in 0..repeats {
            let mut means = (0.0, 0.0);
            let mut gaps = (SpinGaps::default(), SpinGaps::default());
            let mut latencies = (Vec::new(), Vec::new());
            let order: [(&Bench<'_>, bool); 2] = if repeat % 2 == 0 {
                [(baseline, false), (self, true)]
            } else {
                [(self, true), (baseline, false)]
            };
            for (bench, is_scheme) in order {
                progress(&format!(
                    "target {}: {} at {rate:.0} updates/s (half of {saturation_rate:.0}), repeat {}",
                    self.scheme.name(),
                    bench.scheme.name(),
                    repeat + 1
                ))?;
                let before = bench.stall_counters();
                let waits_before = bench.writer_wait_counters();
                let index_before = bench.database.async_index_stats();
                let seed = phase_seed(
                    self.settings,
                    bench.scheme,
                    1000 + target * 100 + u64::from(repeat),
                );
                let run = bench.run_schedule(rate, seed)?;
                bench.drain()?;
                let after = bench.stall_counters();
                bench
                    .database
                    .engine()
                    .wait_for_background_work()
                    .map_err(|e| BenchError::new(format!("background work: {e}")))?;
                let mean = run.latencies.iter().sum::<f64>() / run.latencies.len().max(1) as f64;
                let step = Latency::of(&mut run.latencies.clone());
                let service = Latency::of(&mut run.services.clone());
                // Calls long enough to back the schedule up (each delays the updates due
                // meanwhile): how many, and their time.
                let (slow_calls, slow_call_us) = run
                    .services
                    .iter()
                    .filter(|us| **us >= SLOW_CALL_US)
                    .fold((0_u64, 0.0), |(count, total), us| (count + 1, total + us));
                let waits = bench.writer_wait_counters();
                let index_after = bench.database.async_index_stats();
                let delta: Vec<String> = WRITER_WAIT_COUNTERS
                    .iter()
                    .zip(waits.iter().zip(waits_before.iter()))
                    .map(|(name, (after, before))| {
                        format!("{name}={}", after.saturating_sub(*before))
                    })
                    .collect();
                // What the asynchronous workers did in the step: engine writes of index
                // entries (`index_batches`; each a commit unless split), updates applied and
                // their lag (log2 bucket bounds).
                let worker = if bench.scheme.is_async() {
                    let lag = Lag::between(&index_before.lag_histogram, &index_after.lag_histogram);
                    format!(
                        " index_batches={} index_updates={} lag_p50_us={} lag_p99_us={}",
                        index_after
                            .batches_written
                            .saturating_sub(index_before.batches_written),
                        index_after
                            .updates_applied
                            .saturating_sub(index_before.updates_applied),
                        lag.p50_us,
                        lag.p99_us
                    )
                } else {
                    String::new()
                };
                progress(&format!(
                    "target {} step {}: mean {mean:.1} µs, p50 {:.1} µs, p99 {:.1} µs, max {:.0} µs; service mean {:.2} µs, p50 {:.2} µs, p99 {:.1} µs, max {:.0} µs; slow_calls={} slow_call_ms={:.2}; client_spin_gap_max_us={:.0} client_pauses={} client_unswitched_calls={} client_unswitched_call_max_us={:.0} {}{worker}",
                    self.scheme.name(),
                    bench.scheme.name(),
                    step.p50_us,
                    step.p99_us,
                    step.max_us,
                    service.mean_us,
                    service.p50_us,
                    service.p99_us,
                    service.max_us,
                    slow_calls,
                    slow_call_us / 1e3,
                    micros(run.spin_gaps.longest),
                    run.spin_gaps.pauses,
                    run.spin_gaps.unswitched_calls,
                    micros(run.spin_gaps.longest_unswitched_call),
                    delta.join(" ")
                ))?;
                let side = if is_scheme {
                    means.0 = mean;
                    gaps.0 = run.spin_gaps;
                    latencies.0.clone_from(&run.latencies);
                    drains.0 += after[2].saturating_sub(before[2]);
                    drains.1 += after[3].saturating_sub(before[3]);
                    &mut ours
                } else {
                    means.1 = mean;
                    gaps.1 = run.spin_gaps;
                    latencies.1.clone_from(&run.latencies);
                    &mut theirs
                };
                side.0.extend(run.latencies);
                side.1.extend(run.services);
                side.2 += run.unissued;
                side.3 += after[0].saturating_sub(before[0]);
            }
            repeat_means_us.push(means);
            repeat_client_gaps_ms.push((
                gaps.0.longest.as_secs_f64() * 1e3,
                gaps.1.longest.as_secs_f64() * 1e3,
            ));
            repeat_unswitched_calls.push((gaps.0.unswitched_calls, gaps.1.unswitched_calls));
            if !gaps.0.hit() && !gaps.1.hit() {
                clean.0.append(&mut latencies.0);
                clean.1.append(&mut latencies.1);
                clean.2 += 1;
            }
        }
        Ok(HalfLoad {
            repeat_client_gaps_ms,
            repeat_unswitched_calls,
            unpaused_repeats: clean.2,
            unpaused_latency: Latency::of(&mut clean.0),
            unpaused_baseline_latency: Latency::of(&mut clean.1),
            saturation_rate,
            offered_rate: rate,
            repeats,
            latency: Latency::of(&mut ours.0),
            service: Latency::of(&mut ours.1),
            baseline_latency: Latency::of(&mut theirs.0),
            baseline_service: Latency::of(&mut theirs.1),
            repeat_means_us,
            unissued: ours.2,
            baseline_unissued: theirs.2,
            write_stalls: ours.3,
            baseline_write_stalls: theirs.3,
            flush_drains: drains.0,
            flush_drain_wait_ms: drains.1 as f64 / 1e3,
        })
    }

    /// Closed-loop reads: `count` timed after `count / 10` untimed, each made by `query`.
    pub(crate) fn reads(
        count: u64,
        rng: &mut StdRng,
        query: &mut dyn FnMut(&mut StdRng) -> Result<QueryCounts, BenchError>,
    ) -> Result<Reads, BenchError> {
        for _ in 0..count.div_ceil(10) {
            query(rng)?;
        }
        let mut latencies = Vec::with_capacity(count as usize);
        let (mut hits, mut candidates, mut stale) = (0, 0, 0);
        for _ in 0..count {
            let started = Instant::now();
            let (h, c, s) = query(rng)?;
            latencies.push(micros(started.elapsed()));
            hits += h;
            candidates += c;
            stale += s;
        }
        let n = count.max(1) as f64;
        Ok(Reads {
            latency: Latency::of(&mut latencies),
            hits_per_query: hits as f64 / n,
            candidates_per_query: candidates as f64 / n,
            stale_per_query: stale as f64 / n,
        })
    }

    pub(crate) fn exact_reads(&self, client: &Client<'_>) -> Result<Reads, BenchError> {
        let mut rng = StdRng::seed_from_u64(self.settings.seed ^ 0x5EAD);
        Self::reads(self.settings.exact_reads, &mut rng, &mut |rng| {
            let key = rng.gen_range(1..=self.settings.documents);
            let value = self.values[(key - 1) as usize].load(Ordering::Relaxed);
            client.lookup(i64::from(value))
        })
    }

    pub(crate) fn range_reads(
        &self,
        client: &Client<'_>,
        selectivity_ppm: u64,
    ) -> Result<RangeReads, BenchError> {
        let width = (u64::from(VALUE_DOMAIN) * selectivity_ppm / 1_000_000)
            .clamp(1, u64::from(VALUE_DOMAIN));
        let mut rng = StdRng::seed_from_u64(self.settings.seed ^ 0x0EA6 ^ (selectivity_ppm << 8));
        let reads = Self::reads(self.settings.range_reads, &mut rng, &mut |rng| {
            let lo = rng.gen_range(0..=u64::from(VALUE_DOMAIN) - width) as i64;
            client.range(lo, lo + width as i64 - 1)
        })?;
        Ok(RangeReads {
            selectivity_ppm,
            width_values: width,
            expected_hits: self.settings.documents as f64 * width as f64 / f64::from(VALUE_DOMAIN),
            reads,
        })
    }
}

pub(crate) fn phase_seed(settings: &Settings, scheme: Scheme, phase: u64) -> u64 {
    let scheme_number = Scheme::ALL.iter().position(|s| *s == scheme).unwrap_or(9) as u64;
    settings.seed ^ (scheme_number << 48) ^ (phase << 24)
}

/// The reads of one scheme on its settled database.
pub(crate) fn read_phase(
    bench: &Bench<'_>,
) -> Result<(Option<Reads>, Vec<RangeReads>), BenchError> {
    if bench.scheme == Scheme::NoIndex {
        return Ok((None, Vec::new()));
    }
    bench.settle()?;
    // On a client thread of its own, pinned like the update clients.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                pin_client(bench.settings.client_cpus.as_deref())?;
                let client = client_for(&bench.database, bench.scheme);
                let exact = bench.exact_reads(&client)?;
                let ranges = bench
                    .settings
                    .selectivities_ppm
                    .iter()
                    .map(|ppm| bench.range_reads(&client, *ppm))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((Some(exact), ranges))
            })
            .join()
            .unwrap_or_else(|_| Err(BenchError::new("the read client thread panicked")))
    })
}

/// The measurements of every open database: saturation one scheme after the other, then each
/// load step for every scheme in turn (so that a change in the machine's load, shared with
/// other work, affects the schemes of a step alike), then the reads.
pub(crate) fn measure(
    settings: &Settings,
    benches: &[Bench<'_>],
    progress: Progress<'_>,
) -> Result<(Vec<SchemeResult>, Option<f64>), BenchError> {
    let mut saturations = Vec::new();
    for bench in benches {
        progress(&format!("{}: saturation", bench.scheme.name()))?;
        saturations.push(bench.saturate(phase_seed(settings, bench.scheme, 0))?);
        bench.settle()?;
    }
    let baseline = benches
        .iter()
        .zip(&saturations)
        .find(|(bench, _)| bench.scheme == Scheme::NoIndex)
        .map(|(_, saturation)| saturation.sustained_rate);
    let bases: Vec<f64> = saturations
        .iter()
        .map(|saturation| match (settings.rate_basis, baseline) {
            (RateBasis::Baseline, Some(rate)) => rate,
            _ => saturation.sustained_rate,
        })
        .map(|rate| rate.max(1.0))
        .collect();
    let mut steps: Vec<Vec<LoadStep>> = benches.iter().map(|_| Vec::new()).collect();
    for (position, percent) in settings.load_percents.iter().enumerate() {
        for ((bench, basis), steps) in benches.iter().zip(&bases).zip(&mut steps) {
            if !bench.measured {
                continue;
            }
            let rate = basis * percent / 100.0;
            progress(&format!(
                "{}: {percent}% load ({rate:.0} updates/s)",
                bench.scheme.name()
            ))?;
            steps.push(bench.open_loop(
                *percent,
                rate,
                phase_seed(settings, bench.scheme, position as u64 + 1),
            )?);
        }
    }
    // The targets: each target scheme and no index at half of the scheme's own saturation.
    let mut half_loads: Vec<Option<HalfLoad>> = benches.iter().map(|_| None).collect();
    let no_index = benches.iter().find(|bench| bench.scheme == Scheme::NoIndex);
    if let (Some(no_index), true) = (no_index, settings.target_repeats > 0) {
        for (target, (scheme, _)) in TARGETS.iter().enumerate() {
            let Some(position) = benches
                .iter()
                .position(|bench| bench.scheme == *scheme && bench.measured)
            else {
                continue;
            };
            half_loads[position] = Some(benches[position].half_load(
                no_index,
                saturations[position].sustained_rate,
                target as u64,
                progress,
            )?);
        }
    }
    let mut results = Vec::new();
    for ((((bench, saturation), basis), steps), half_load) in benches
        .iter()
        .zip(saturations)
        .zip(bases)
        .zip(steps)
        .zip(half_loads)
    {
        if !bench.measured {
            continue;
        }
        progress(&format!("{}: reads", bench.scheme.name()))?;
        let (exact, ranges) = read_phase(bench)?;
        results.push(SchemeResult {
            scheme: bench.scheme.name().to_owned(),
            saturation,
            basis_rate: basis,
            steps,
            half_load,
            exact,
            ranges,
        });
    }
    Ok((results, baseline))
}

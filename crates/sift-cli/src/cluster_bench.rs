//! `sift bench cluster`: write and read throughput of `sift node` processes on loopback — one
//! node (a one-voter raft group: log, apply, no replication) against three replicas — and,
//! with three, failover time after kill -9 of the leader and catch-up time of the restarted
//! node. Configurations alternate within each round, so machine drift hits both.

use crate::cluster::{node_address, runtime, spawn_node, stop_children, wait_for_voters, UpArgs};
use sift_cluster::{ClusterClient, Command, CommandResult, ReadConsistency};
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct ClusterBenchArgs {
    /// Documents written per configuration and round.
    #[arg(long, default_value_t = 20_000)]
    pub writes: u64,
    /// Linearizable point reads per configuration and round.
    #[arg(long, default_value_t = 20_000)]
    pub reads: u64,
    /// Concurrent clients (each its own connection).
    #[arg(long, default_value_t = 16)]
    pub clients: u64,
    /// Rounds; each runs every configuration once, in turn.
    #[arg(long, default_value_t = 3)]
    pub rounds: u64,
    /// Documents written while the killed node is down, before it restarts.
    #[arg(long, default_value_t = 5_000)]
    pub behind: u64,
    /// First port; node N of a configuration listens on base-port + N - 1.
    #[arg(long, default_value_t = 7601)]
    pub base_port: u16,
}

struct Row {
    nodes: u64,
    writes_per_second: f64,
    reads_per_second: f64,
    failover_ms: Option<f64>,
    catch_up_ms: Option<f64>,
}

fn document(key: u64) -> Vec<u8> {
    // ~250 bytes, like a tweet of the LevelDB++ workload.
    format!(
        r#"{{"id":"k{key:010}","user":{},"time":{},"text":"{}"}}"#,
        key % 1000,
        1_600_000_000 + key,
        "lorem ipsum dolor sit amet ".repeat(7)
    )
    .into_bytes()
}

async fn write_all(
    addresses: &[String],
    keys: std::ops::Range<u64>,
    clients: u64,
) -> Result<Duration, String> {
    let next = Arc::new(AtomicU64::new(keys.start));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let client = ClusterClient::new(addresses.to_vec(), None).map_err(|e| e.to_string())?;
        let next = Arc::clone(&next);
        let end = keys.end;
        tasks.push(tokio::spawn(async move {
            loop {
                let key = next.fetch_add(1, Ordering::Relaxed);
                if key >= end {
                    return Ok::<(), String>(());
                }
                let command = Command::Put {
                    collection: "bench".into(),
                    document: document(key),
                };
                match client.write(command).await {
                    Ok(CommandResult::Written { .. }) => {}
                    Ok(other) => return Err(format!("write refused: {other:?}")),
                    Err(e) => return Err(format!("write failed: {e}")),
                }
            }
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok(started.elapsed())
}

async fn read_all(
    addresses: &[String],
    reads: u64,
    keys: u64,
    clients: u64,
) -> Result<Duration, String> {
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client_number in 0..clients {
        let client = ClusterClient::new(addresses.to_vec(), None).map_err(|e| e.to_string())?;
        let done = Arc::clone(&done);
        tasks.push(tokio::spawn(async move {
            let mut state = client_number.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            while done.fetch_add(1, Ordering::Relaxed) < reads {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let pk = format!("k{:010}", state % keys);
                match client
                    .get("bench", pk.as_bytes(), ReadConsistency::Linearizable)
                    .await
                {
                    Ok(Some(_)) => {}
                    Ok(None) => return Err(format!("{pk} missing")),
                    Err(e) => return Err(format!("read failed: {e}")),
                }
            }
            Ok::<(), String>(())
        }));
    }
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok(started.elapsed())
}

async fn leader_of(client: &ClusterClient, addresses: &[String]) -> Option<usize> {
    for (index, address) in addresses.iter().enumerate() {
        if let Ok(status) = client.status_of(address).await {
            if status.regions.first().is_some_and(|r| r.role == "leader") {
                return Some(index);
            }
        }
    }
    None
}

/// Kills the leader under continuous writes: time from the kill to the next acknowledged
/// write. Then writes `behind` more documents, restarts the killed node and times it until
/// it has applied everything the leader had.
async fn failover_and_catch_up(
    up: &UpArgs,
    children: &mut [(u64, Child)],
    addresses: &[String],
    args: &ClusterBenchArgs,
) -> Result<(f64, f64), String> {
    let probe = ClusterClient::new(addresses.to_vec(), Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    let leader = leader_of(&probe, addresses).await.ok_or("no leader")?;
    let stop = Arc::new(AtomicBool::new(false));
    // (sent, acknowledged) of every write: failover counts only writes sent after the kill
    // (an answer to one sent before may still arrive after it).
    let last_ack = Arc::new(parking_lot::Mutex::new(Vec::<(Instant, Instant)>::new()));
    let mut writers = Vec::new();
    for writer in 0..args.clients {
        let client = ClusterClient::new(addresses.to_vec(), Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        let stop = Arc::clone(&stop);
        let acks = Arc::clone(&last_ack);
        writers.push(tokio::spawn(async move {
            let mut key = 1_000_000_000 + writer * 1_000_000;
            while !stop.load(Ordering::Relaxed) {
                key += 1;
                let command = Command::Put {
                    collection: "bench".into(),
                    document: document(key),
                };
                let sent = Instant::now();
                if let Ok(CommandResult::Written { .. }) = client.write(command).await {
                    acks.lock().push((sent, Instant::now()));
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (killed_node, child) = &mut children[leader];
    let killed_node = *killed_node;
    let killed_at = Instant::now();
    child.kill().map_err(|e| e.to_string())?;
    child.wait().map_err(|e| e.to_string())?;
    let failover = loop {
        let first = last_ack
            .lock()
            .iter()
            .filter(|(sent, _)| *sent > killed_at)
            .map(|(_, acknowledged)| *acknowledged)
            .min();
        if let Some(first) = first {
            break first - killed_at;
        }
        if killed_at.elapsed() > Duration::from_secs(30) {
            return Err("no write acknowledged within 30 s of killing the leader".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        let _ = writer.await;
    }
    let remaining: Vec<String> = addresses
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != leader)
        .map(|(_, a)| a.clone())
        .collect();
    write_all(
        &remaining,
        2_000_000_000..2_000_000_000 + args.behind,
        args.clients,
    )
    .await?;
    let new_leader_index = leader_of(&probe, addresses)
        .await
        .ok_or("no leader after failover")?;
    let target = probe
        .status_of(&addresses[new_leader_index])
        .await
        .map_err(|e| e.to_string())?
        .regions
        .first()
        .and_then(|r| r.last_log_index)
        .ok_or("the leader has no log")?;
    let restarted_at = Instant::now();
    children[leader].1 = spawn_node(up, killed_node)?;
    let caught_up = loop {
        if let Ok(status) = probe.status_of(&addresses[leader]).await {
            if status.regions.first().and_then(|r| r.applied_index) >= Some(target) {
                break restarted_at.elapsed();
            }
        }
        if restarted_at.elapsed() > Duration::from_mins(2) {
            return Err("the restarted node did not catch up within 120 s".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    Ok((failover.as_secs_f64() * 1e3, caught_up.as_secs_f64() * 1e3))
}

fn run_configuration(nodes: u64, args: &ClusterBenchArgs) -> Result<Row, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("cannot create a directory: {e}"))?;
    let up = UpArgs {
        nodes,
        dir: dir.path().to_path_buf(),
        base_port: args.base_port,
    };
    let mut children: Vec<(u64, Child)> = Vec::new();
    let result = (|| {
        for node in 1..=nodes {
            children.push((node, spawn_node(&up, node)?));
        }
        let addresses: Vec<String> = (1..=nodes)
            .map(|n| node_address(&up, n))
            .collect::<Result<_, _>>()?;
        runtime()?.block_on(async {
            wait_for_voters(&addresses[0], nodes, Duration::from_mins(1), &mut children).await?;
            let admin = ClusterClient::new(addresses.clone(), None).map_err(|e| e.to_string())?;
            admin
                .write(Command::CreateCollection {
                    name: "bench".into(),
                    pk_path: "id".into(),
                })
                .await
                .map_err(|e| e.to_string())?;
            let wrote = write_all(&addresses, 0..args.writes, args.clients).await?;
            let read = read_all(&addresses, args.reads, args.writes, args.clients).await?;
            let (failover_ms, catch_up_ms) = if nodes >= 3 {
                let (failover, catch_up) =
                    failover_and_catch_up(&up, &mut children, &addresses, args).await?;
                (Some(failover), Some(catch_up))
            } else {
                (None, None)
            };
            Ok(Row {
                nodes,
                writes_per_second: args.writes as f64 / wrote.as_secs_f64(),
                reads_per_second: args.reads as f64 / read.as_secs_f64(),
                failover_ms,
                catch_up_ms,
            })
        })
    })();
    stop_children(&mut children);
    result
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => f64::midpoint(values[n / 2 - 1], values[n / 2]),
    }
}

pub fn run(args: &ClusterBenchArgs) -> Result<(), String> {
    if args.clients == 0 || args.writes == 0 || args.rounds == 0 {
        return Err("--clients, --writes and --rounds must be at least 1".into());
    }
    let mut rows = Vec::new();
    println!("nodes  round  writes/s  reads/s  failover_ms  catch_up_ms");
    for round in 1..=args.rounds {
        for nodes in [1, 3] {
            let row = run_configuration(nodes, args)?;
            println!(
                "{:>5}  {round:>5}  {:>8.0}  {:>7.0}  {:>11}  {:>11}",
                row.nodes,
                row.writes_per_second,
                row.reads_per_second,
                row.failover_ms.map_or("-".into(), |v| format!("{v:.0}")),
                row.catch_up_ms.map_or("-".into(), |v| format!("{v:.0}")),
            );
            rows.push(row);
        }
    }
    let of = |nodes: u64, pick: fn(&Row) -> Option<f64>| {
        median(
            rows.iter()
                .filter(|r| r.nodes == nodes)
                .filter_map(pick)
                .collect(),
        )
    };
    let single_writes = of(1, |r| Some(r.writes_per_second));
    let triple_writes = of(3, |r| Some(r.writes_per_second));
    println!(
        "medians: writes/s one node {single_writes:.0}, three replicas {triple_writes:.0} ({:.2}x); \
         reads/s {:.0} vs {:.0}; failover {:.0} ms; catch-up {:.0} ms",
        triple_writes / single_writes,
        of(1, |r| Some(r.reads_per_second)),
        of(3, |r| Some(r.reads_per_second)),
        of(3, |r| r.failover_ms),
        of(3, |r| r.catch_up_ms),
    );
    Ok(())
}

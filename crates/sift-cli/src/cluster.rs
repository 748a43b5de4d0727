//! `sift node` and `sift cluster`: a node of a replicated cluster as its own process, a local
//! cluster of such processes, its status, and the document commands' `--cluster` form
//! (docs/cluster.md). The work lives in `sift_cluster`.

use crate::docs::{ImportArgs, IndexCreateArgs, IndexDropArgs};
use sift_cluster::rpc::messages::{NodeStatus, Query, RegionStatus, QUERY_LIMIT_MAX};
use sift_cluster::{ClusterClient, Command, CommandResult, Node, NodeOptions, ReadConsistency};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    /// The node's id in the cluster (1, 2, ...); its directory remembers it.
    #[arg(long)]
    pub id: u64,
    /// The node's directory: its raft log and its regions' data (created if missing).
    #[arg(long)]
    pub dir: PathBuf,
    /// Address to serve on; the other nodes and clients reach the node there.
    #[arg(long, default_value = "127.0.0.1:7401")]
    pub listen: SocketAddr,
    /// Any node of the cluster to join (`host:port`). Without it a new node starts a new
    /// cluster; a node that is a member already restarts as it was either way.
    #[arg(long)]
    pub join: Option<String>,
    /// Checkpoint each region after this many log entries since the last checkpoint.
    #[arg(long, default_value_t = 10_000)]
    pub snapshot_every: u64,
    /// Log entries kept below a checkpoint (a follower further behind gets the checkpoint).
    #[arg(long, default_value_t = 1_000)]
    pub log_kept_after_snapshot: u64,
}

#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// Starts a local cluster: one `sift node` process per node, on loopback ports from
    /// --base-port, directories and logs under --dir. Stays in the foreground; Ctrl-C or
    /// SIGTERM stops every node. Started again on the same --dir, the nodes restart as they
    /// were.
    Up(UpArgs),
    /// Shows the nodes, the regions, their leaders, log positions, sizes and replication lag.
    Status(StatusArgs),
    /// Creates a collection on the cluster (nothing happens if it exists with the same key).
    CreateCollection(CreateCollectionArgs),
}

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Nodes to start; each becomes a voting replica of the region (three is the usual size).
    #[arg(long, default_value_t = 3)]
    pub nodes: u64,
    /// Directory of the cluster: node N lives in DIR/node-N, its log in DIR/node-N/node.log.
    #[arg(long)]
    pub dir: PathBuf,
    /// Node N listens on 127.0.0.1:(base-port + N - 1).
    #[arg(long, default_value_t = 7401)]
    pub base_port: u16,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Any node of the cluster (`host:port`).
    #[arg(long)]
    pub at: String,
    /// One JSON object per node instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct CreateCollectionArgs {
    /// Any node of the cluster (`host:port`).
    #[arg(long)]
    pub at: String,
    #[arg(long)]
    pub name: String,
    /// JSON path of the primary key in each document (`id`, `user.id`).
    #[arg(long, default_value = "id")]
    pub pk: String,
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// Waits for Ctrl-C or SIGTERM.
async fn stop_signal() -> Result<(), String> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| format!("cannot watch for SIGTERM: {e}"))?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    Ok(())
}

pub fn node(args: &NodeArgs) -> Result<(), String> {
    crate::init_logging("warn");
    runtime()?.block_on(async {
        let options = NodeOptions {
            id: args.id,
            dir: args.dir.clone(),
            listen: args.listen,
            join: args.join.clone(),
            data_options: sift_index::DatabaseOptions::default(),
            retention: sift_cluster::LogRetention {
                snapshot_every: args.snapshot_every,
                kept_after_snapshot: args.log_kept_after_snapshot,
            },
        };
        let node = Node::start(options).await.map_err(|e| e.to_string())?;
        // The line scripts and `sift cluster up` wait for.
        println!("node {} serving at {}", node.id(), node.address());
        let _ = std::io::stdout().flush();
        stop_signal().await?;
        node.shutdown().await.map_err(|e| e.to_string())
    })
}

pub fn run(command: &ClusterCommand) -> Result<(), String> {
    match command {
        ClusterCommand::Up(args) => up(args),
        ClusterCommand::Status(args) => status(args),
        ClusterCommand::CreateCollection(args) => create_collection(args),
    }
}

pub(crate) fn node_address(args: &UpArgs, node: u64) -> Result<String, String> {
    let port = u64::from(args.base_port) + node - 1;
    if port > u64::from(u16::MAX) {
        return Err(format!(
            "--base-port {} leaves no port for node {node}",
            args.base_port
        ));
    }
    Ok(format!("127.0.0.1:{port}"))
}

pub(crate) fn spawn_node(args: &UpArgs, node: u64) -> Result<Child, String> {
    let executable =
        std::env::current_exe().map_err(|e| format!("cannot find the sift executable: {e}"))?;
    let dir = args.dir.join(format!("node-{node}"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let log_path = dir.join("node.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
    let log_err = log
        .try_clone()
        .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
    let mut command = std::process::Command::new(executable);
    command
        .arg("node")
        .arg("--id")
        .arg(node.to_string())
        .arg("--dir")
        .arg(&dir)
        .arg("--listen")
        .arg(node_address(args, node)?)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    if node > 1 {
        command.arg("--join").arg(node_address(args, 1)?);
    }
    command
        .spawn()
        .map_err(|e| format!("cannot start node {node}: {e}"))
}

pub(crate) fn stop_children(children: &mut [(u64, Child)]) {
    for (_, child) in children.iter() {
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: kill(2) on our own child's pid; no memory is involved.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
    }
    for (node, child) in children.iter_mut() {
        match child.wait() {
            Ok(status) if status.success() => {}
            Ok(status) => eprintln!("node {node} stopped with {status}"),
            Err(e) => eprintln!("node {node}: {e}"),
        }
    }
}

fn up(args: &UpArgs) -> Result<(), String> {
    if args.nodes == 0 {
        return Err("--nodes must be at least 1".into());
    }
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| format!("cannot create {}: {e}", args.dir.display()))?;
    let mut children: Vec<(u64, Child)> = Vec::new();
    let result = (|| {
        for node in 1..=args.nodes {
            children.push((node, spawn_node(args, node)?));
        }
        let first = node_address(args, 1)?;
        runtime()?.block_on(async {
            wait_for_voters(&first, args.nodes, Duration::from_mins(1), &mut children).await?;
            println!(
                "cluster of {} nodes up under {}",
                args.nodes,
                args.dir.display()
            );
            for (node, child) in &children {
                println!(
                    "  node {node}: {} (pid {}, log {})",
                    node_address(args, *node)?,
                    child.id(),
                    args.dir
                        .join(format!("node-{node}"))
                        .join("node.log")
                        .display()
                );
            }
            println!("status:  sift cluster status --at {first}");
            println!("write:   sift cluster create-collection --at {first} --name docs");
            println!(
                "         sift put --cluster {first} --collection docs --doc '{{\"id\":\"a\"}}'"
            );
            println!(
                "stop:    Ctrl-C here (or SIGTERM to pid {})",
                std::process::id()
            );
            let _ = std::io::stdout().flush();
            watch(&mut children).await
        })
    })();
    stop_children(&mut children);
    result
}

/// Waits until every started node is a voter of the first region, or fails naming a node
/// that exited.
pub(crate) async fn wait_for_voters(
    first: &str,
    nodes: u64,
    timeout: Duration,
    children: &mut [(u64, Child)],
) -> Result<(), String> {
    let client = ClusterClient::new(vec![first.to_string()], Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    loop {
        for (node, child) in children.iter_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "node {node} exited ({status}) while starting: see its node.log"
                ));
            }
        }
        if let Ok(status) = client.status_of(first).await {
            let voters = status.regions.first().map_or(0, |r| {
                r.members.iter().filter(|(_, _, voter)| *voter).count()
            });
            let led = status.regions.first().is_some_and(|r| r.leader.is_some());
            if voters as u64 == nodes && led {
                return Ok(());
            }
        }
        if started.elapsed() > timeout {
            return Err(format!(
                "the {nodes} nodes did not form a cluster within {timeout:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs until a stop signal; says so when a node exits on its own.
async fn watch(children: &mut [(u64, Child)]) -> Result<(), String> {
    let stop = stop_signal();
    tokio::pin!(stop);
    let mut reported = std::collections::HashSet::new();
    loop {
        tokio::select! {
            stopped = &mut stop => return stopped,
            () = tokio::time::sleep(Duration::from_millis(500)) => {
                for (node, child) in children.iter_mut() {
                    if let Ok(Some(status)) = child.try_wait() {
                        if reported.insert(*node) {
                            eprintln!("node {node} exited ({status}); the others go on");
                        }
                    }
                }
            }
        }
    }
}

fn client(address: &str) -> Result<ClusterClient, String> {
    ClusterClient::new(vec![address.to_string()], None).map_err(|e| e.to_string())
}

fn status(args: &StatusArgs) -> Result<(), String> {
    let statuses = runtime()?.block_on(async {
        client(&args.at)?
            .cluster_status()
            .await
            .map_err(|e| e.to_string())
    })?;
    if args.json {
        for (address, status) in &statuses {
            let row = match status {
                Ok(status) => status_json(status),
                Err(e) => serde_json::json!({"address": address, "error": e.to_string()}),
            };
            println!("{row}");
        }
        return Ok(());
    }
    print!("{}", status_table(&statuses));
    Ok(())
}

fn status_json(status: &NodeStatus) -> serde_json::Value {
    let regions: Vec<serde_json::Value> = status
        .regions
        .iter()
        .map(|r| {
            serde_json::json!({
                "region": r.region, "role": r.role, "term": r.term, "leader": r.leader,
                "last_log_index": r.last_log_index, "applied_index": r.applied_index,
                "snapshot_index": r.snapshot_index, "data_bytes": r.data_bytes,
                "members": r.members.iter().map(|(id, address, voter)| serde_json::json!({
                    "node": id, "address": address, "voter": voter})).collect::<Vec<_>>(),
                "matched": r.matched.iter().map(|(id, index)| serde_json::json!({
                    "node": id, "index": index})).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({"node": status.node, "address": status.address, "regions": regions})
}

fn optional(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn bytes(value: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if value >= 1 << 20 {
        format!("{:.1} MiB", value as f64 / MIB)
    } else {
        format!("{:.1} KiB", value as f64 / 1024.0)
    }
}

/// The status tables: one row per node and region; the leader's view gives how far behind
/// each member's log is.
fn status_table(statuses: &[(String, Result<NodeStatus, sift_cluster::ClientError>)]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut rows: Vec<(u64, &str, &RegionStatus)> = Vec::new();
    for (address, status) in statuses {
        match status {
            Ok(status) => {
                for region in &status.regions {
                    rows.push((status.node, address, region));
                }
            }
            Err(e) => {
                let _ = writeln!(out, "{address}: down ({e})");
            }
        }
    }
    rows.sort_by_key(|(node, _, region)| (region.region, *node));
    let mut current_region = None;
    for (node, address, region) in &rows {
        let leader = rows
            .iter()
            .find(|(_, _, r)| r.region == region.region && r.role == "leader");
        if current_region != Some(region.region) {
            current_region = Some(region.region);
            let _ =
                writeln!(
                out,
                "region {}: leader {}\n  {:<5} {:<22} {:<9} {:>5} {:>9} {:>9} {:>9} {:>11} {:>6}",
                region.region,
                leader.map_or_else(|| "none".to_string(), |(n, _, _)| format!("node {n}")),
                "node", "address", "role", "term", "last log", "applied", "snapshot", "data", "lag"
            );
        }
        let lag = leader.and_then(|(_, _, leader)| {
            let last = leader.last_log_index?;
            leader
                .matched
                .iter()
                .find(|(id, _)| id == node)
                .map(|(_, index)| last.saturating_sub(index.unwrap_or(0)))
        });
        let _ = writeln!(
            out,
            "  {:<5} {:<22} {:<9} {:>5} {:>9} {:>9} {:>9} {:>11} {:>6}",
            node,
            address,
            region.role,
            region.term,
            optional(region.last_log_index),
            optional(region.applied_index),
            optional(region.snapshot_index),
            bytes(region.data_bytes),
            optional(lag),
        );
    }
    out
}

fn create_collection(args: &CreateCollectionArgs) -> Result<(), String> {
    let command = Command::CreateCollection {
        name: args.name.clone(),
        pk_path: args.pk.clone(),
    };
    if let CommandResult::Rejected { reason } = write(&args.at, command)? {
        return Err(reason);
    }
    println!("collection {:?} ready (primary key {})", args.name, args.pk);
    Ok(())
}

fn write(address: &str, command: Command) -> Result<CommandResult, String> {
    runtime()?.block_on(async {
        client(address)?
            .write(command)
            .await
            .map_err(|e| e.to_string())
    })
}

pub fn put(address: &str, collection: &str, document: &str) -> Result<(), String> {
    let command = Command::Put {
        collection: collection.to_string(),
        document: document.as_bytes().to_vec(),
    };
    if let CommandResult::Rejected { reason } = write(address, command)? {
        return Err(reason);
    }
    println!("stored (replicated to a majority)");
    Ok(())
}

pub fn delete(address: &str, collection: &str, pk: &str) -> Result<(), String> {
    let command = Command::Delete {
        collection: collection.to_string(),
        pk: pk.as_bytes().to_vec(),
    };
    match write(address, command)? {
        CommandResult::Rejected { reason } => Err(reason),
        CommandResult::NotFound => {
            println!("no document with primary key {pk:?}; nothing deleted");
            Ok(())
        }
        _ => {
            println!("deleted (replicated to a majority)");
            Ok(())
        }
    }
}

pub fn get(address: &str, collection: &str, pk: &str, json: bool) -> Result<(), String> {
    let document = runtime()?.block_on(async {
        client(address)?
            .get(collection, pk.as_bytes(), ReadConsistency::Linearizable)
            .await
            .map_err(|e| e.to_string())
    })?;
    let Some(document) = document else {
        return Err(format!(
            "no document with primary key {pk:?} in {collection:?}"
        ));
    };
    let text = String::from_utf8_lossy(&document.json);
    if json {
        let value: serde_json::Value = serde_json::from_slice(&document.json)
            .map_err(|e| format!("stored document {pk:?} is not JSON: {e}"))?;
        println!("{}", serde_json::json!({"pk": pk, "doc": value}));
    } else {
        println!("{pk}\t{text}");
    }
    Ok(())
}

pub fn query(
    address: &str,
    collection: &str,
    index: &str,
    query: Query,
    limit: Option<usize>,
    json: bool,
) -> Result<(), String> {
    let limit = match limit {
        None => QUERY_LIMIT_MAX,
        Some(limit) => u32::try_from(limit)
            .ok()
            .filter(|l| *l <= QUERY_LIMIT_MAX)
            .ok_or_else(|| format!("--limit: at most {QUERY_LIMIT_MAX} through a cluster"))?,
    };
    let documents = runtime()?.block_on(async {
        client(address)?
            .query(
                collection,
                index,
                query,
                limit,
                ReadConsistency::Linearizable,
            )
            .await
            .map_err(|e| e.to_string())
    })?;
    let mut out = std::io::stdout().lock();
    for document in &documents {
        let pk = String::from_utf8_lossy(&document.pk);
        if json {
            let value: serde_json::Value = serde_json::from_slice(&document.json)
                .map_err(|e| format!("stored document {pk:?} is not JSON: {e}"))?;
            writeln!(out, "{}", serde_json::json!({"pk": pk, "doc": value}))
        } else {
            writeln!(out, "{pk}\t{}", String::from_utf8_lossy(&document.json))
        }
        .map_err(|e| e.to_string())?;
    }
    if documents.len() as u64 == u64::from(QUERY_LIMIT_MAX) && limit == QUERY_LIMIT_MAX {
        eprintln!(
            "{} hits (a query through a cluster returns at most {QUERY_LIMIT_MAX})",
            documents.len()
        );
    } else {
        eprintln!("{} hits", documents.len());
    }
    Ok(())
}

pub fn create_index(args: &IndexCreateArgs) -> Result<(), String> {
    let address = args.db.cluster.as_deref().unwrap_or_default();
    let definition = sift_cluster::IndexDefinition {
        name: args.name.clone(),
        path: args.path.clone(),
        attr_type: args.attr_type.to_string(),
        kind: args.kind.to_string(),
        maintenance: args.maintenance.map(|m| m.to_string()),
        read_repair: args.read_repair,
        unique: args.unique,
        split_delta: args.delta.map(|d| d.to_string()),
        validation: args.validation.map(|v| v.to_string()),
        bloom_bits_per_key: args.bloom_bits_per_key,
    };
    let command = Command::CreateIndex {
        collection: args.collection.clone(),
        definition,
    };
    if let CommandResult::Rejected { reason } = write(address, command)? {
        return Err(reason);
    }
    println!(
        "created index {:?} on {:?} (on every replica)",
        args.name, args.collection
    );
    Ok(())
}

pub fn drop_index(args: &IndexDropArgs) -> Result<(), String> {
    let address = args.db.cluster.as_deref().unwrap_or_default();
    let command = Command::DropIndex {
        collection: args.collection.clone(),
        name: args.name.clone(),
    };
    match write(address, command)? {
        CommandResult::Rejected { reason } => Err(reason),
        CommandResult::NotFound => Err(format!(
            "collection {:?} has no index {:?}",
            args.collection, args.name
        )),
        _ => {
            println!("dropped index {:?} of {:?}", args.name, args.collection);
            Ok(())
        }
    }
}

/// Documents per `PutMany` entry of an import.
const IMPORT_BATCH_DOCUMENTS: usize = 512;

/// Imports a JSON Lines file through the cluster, in batches written one after another (so a
/// later line replaces an earlier one with its primary key, as in a local import).
pub fn import(address: &str, args: &ImportArgs) -> Result<(), String> {
    use std::io::BufRead;
    let file = std::fs::File::open(&args.file)
        .map_err(|e| format!("cannot read {}: {e}", args.file.display()))?;
    let started = Instant::now();
    let client = client(address)?;
    let runtime = runtime()?;
    let created = runtime.block_on(client.write(Command::CreateCollection {
        name: args.collection.clone(),
        pk_path: args.pk.clone(),
    }));
    if let CommandResult::Rejected { reason } = created.map_err(|e| e.to_string())? {
        return Err(reason);
    }
    let (mut imported, mut skipped) = (0_u64, 0_u64);
    let mut batch: Vec<(usize, String)> = Vec::with_capacity(IMPORT_BATCH_DOCUMENTS);
    let mut lines = std::io::BufReader::new(file).lines().enumerate();
    loop {
        let next = lines.next();
        let finished = next.is_none();
        if let Some((index, line)) = next {
            let line =
                line.map_err(|e| format!("{}: line {}: {e}", args.file.display(), index + 1))?;
            if !line.trim().is_empty() {
                batch.push((index + 1, line));
            }
            if batch.len() < IMPORT_BATCH_DOCUMENTS {
                continue;
            }
        }
        if !batch.is_empty() {
            let command = Command::PutMany {
                collection: args.collection.clone(),
                documents: batch
                    .iter()
                    .map(|(_, line)| line.clone().into_bytes())
                    .collect(),
            };
            match runtime
                .block_on(client.write(command))
                .map_err(|e| e.to_string())?
            {
                CommandResult::Batch { written, rejected } => {
                    imported += written;
                    for (position, reason) in rejected {
                        let line = batch.get(position as usize).map_or(0, |(n, _)| *n);
                        if args.strict {
                            return Err(format!(
                                "{}: line {line}: {reason} (stopping because of --strict; the \
                                 valid documents of its batch of {} were written)",
                                args.file.display(),
                                batch.len()
                            ));
                        }
                        skipped += 1;
                        eprintln!(
                            "sift: {}: line {line} skipped: {reason}",
                            args.file.display()
                        );
                    }
                }
                CommandResult::Rejected { reason } => return Err(reason),
                other => return Err(format!("unexpected answer to a batch: {other:?}")),
            }
            batch.clear();
        }
        if finished {
            break;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "imported {imported} documents into {:?} in {seconds:.1} s ({:.0} documents/s); {skipped} bad lines skipped",
        args.collection,
        imported as f64 / seconds.max(1e-9)
    );
    Ok(())
}

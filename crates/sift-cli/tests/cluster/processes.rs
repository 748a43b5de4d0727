//! `sift node` processes: started, killed, paused and restarted by the tests.

use sift_cluster::rpc::messages::NodeStatus;
use sift_cluster::ClusterClient;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port (bound and released: another process could take it meanwhile, which
/// would fail the test loudly, not wrongly).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One node: its directory and address stay while its process comes and goes.
pub struct NodeProcess {
    pub id: u64,
    pub dir: PathBuf,
    pub address: String,
    /// Extra arguments of `sift node` (log retention).
    pub extra: Vec<String>,
    child: Option<Child>,
}

impl NodeProcess {
    pub fn new(root: &Path, id: u64, extra: &[&str]) -> NodeProcess {
        NodeProcess {
            id,
            dir: root.join(format!("node-{id}")),
            address: format!("127.0.0.1:{}", free_port()),
            extra: extra.iter().map(ToString::to_string).collect(),
            child: None,
        }
    }

    /// Starts the process and waits (up to 60 s) for its "serving at" line.
    pub fn start(&mut self, join: Option<&str>) {
        assert!(self.child.is_none(), "node {} is running", self.id);
        std::fs::create_dir_all(&self.dir).unwrap();
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.with_extension("stderr"))
            .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_sift"));
        command
            .args([
                "node",
                "--id",
                &self.id.to_string(),
                "--listen",
                &self.address,
            ])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        if let Some(seed) = join {
            command.args(["--join", seed]);
        }
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("serving at") {
                    let _ = sender.send(line);
                }
            }
        });
        if receiver.recv_timeout(Duration::from_mins(1)).is_err() {
            let _ = child.kill();
            let log =
                std::fs::read_to_string(self.dir.with_extension("stderr")).unwrap_or_default();
            panic!(
                "node {} did not start within 60 s; its log:\n{log}",
                self.id
            );
        }
        self.child = Some(child);
    }

    /// The process id of the running node.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.as_ref().expect("node running").id()).unwrap()
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// kill -9: the node gets no chance to flush or say goodbye.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("node running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Freezes the process (SIGSTOP): to the others it is a node cut off from the network,
    /// and when resumed it comes back with its old view of the cluster.
    pub fn pause(&self) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.pid(), libc::SIGSTOP) }, 0);
    }

    pub fn resume(&self) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.pid(), libc::SIGCONT) }, 0);
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill(2) on our own child's pid (a paused one must be woken to die
            // cleanly under some kernels; SIGKILL works on stopped processes anyway).
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Three nodes started as a cluster: node 1 alone, then 2 and 3 joining through it.
pub fn start_cluster(root: &Path, extra: &[&str]) -> Vec<NodeProcess> {
    let mut nodes: Vec<NodeProcess> = (1..=3)
        .map(|id| NodeProcess::new(root, id, extra))
        .collect();
    nodes[0].start(None);
    let seed = nodes[0].address.clone();
    for node in &mut nodes[1..] {
        node.start(Some(&seed));
    }
    nodes
}

pub fn client_of(nodes: &[&NodeProcess], deadline: Duration) -> ClusterClient {
    ClusterClient::new(
        nodes.iter().map(|n| n.address.clone()).collect(),
        Some(deadline),
    )
    .unwrap()
}

/// The first region's status on `node`, if it answers.
pub async fn status(node: &NodeProcess) -> Option<NodeStatus> {
    let client = client_of(&[node], Duration::from_secs(2));
    client.status_of(&node.address).await.ok()
}

/// The index of the node (in `nodes`) that leads the first region, waiting up to 20 s for
/// one running node to say it leads.
pub async fn leader(nodes: &[NodeProcess]) -> usize {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        for (index, node) in nodes.iter().enumerate() {
            if !node.is_running() {
                continue;
            }
            if let Some(status) = status(node).await {
                if status.regions.first().is_some_and(|r| r.role == "leader") {
                    return index;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no leader within 20 s");
}

/// Waits (up to 60 s) until every running node has applied the leader's whole log.
pub async fn wait_converged(nodes: &[NodeProcess]) {
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < Duration::from_mins(1) {
        let mut applied = Vec::new();
        let mut leader_last = None;
        for node in nodes.iter().filter(|n| n.is_running()) {
            let Some(status) = status(node).await else {
                applied.push(None);
                continue;
            };
            let region = &status.regions[0];
            if region.role == "leader" {
                leader_last = region.last_log_index;
            }
            applied.push(region.applied_index);
        }
        if leader_last.is_some() && applied.iter().all(|a| *a == leader_last) {
            return;
        }
        last = format!("leader's last log {leader_last:?}, applied {applied:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the nodes did not converge within 60 s: {last}");
}

//! A follower that fell behind the leader's purged log catches up from a streamed checkpoint.

use crate::processes::{client_of, leader, start_cluster, wait_converged};
use crate::workload::{create_collection, document, value_of, COLLECTION};
use sift_cluster::{Command, CommandResult, ReadConsistency};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_behind_the_purged_log_installs_a_streamed_checkpoint() {
    let root = tempfile::tempdir().unwrap();
    // Checkpoint every 100 entries, keep 10 below it: a follower away for a few hundred
    // writes can only catch up from a checkpoint.
    let retention = ["--snapshot-every", "100", "--log-kept-after-snapshot", "10"];
    let mut nodes = start_cluster(root.path(), &retention);
    let all: Vec<_> = nodes.iter().collect();
    let client = client_of(&all, Duration::from_secs(10));
    create_collection(&client).await;

    let current = leader(&nodes).await;
    let away = (0..3).find(|&i| i != current).unwrap();
    nodes[away].kill9();
    // ~4 KiB of incompressible text per document: the archive spans several 1 MiB chunks.
    const DOCUMENTS: u64 = 800;
    let client = client_of(
        &nodes.iter().filter(|n| n.is_running()).collect::<Vec<_>>(),
        Duration::from_secs(10),
    );
    for key in 0..DOCUMENTS {
        let mut state = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let filler: String = (0..4096)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from(b'a' + (state % 26) as u8)
            })
            .collect();
        let json = String::from_utf8(document(key, key + 1)).unwrap();
        let json = json.replacen('{', &format!(r#"{{"filler":"{filler}","#), 1);
        let result = client
            .write(Command::Put {
                collection: COLLECTION.into(),
                document: json.into_bytes(),
            })
            .await
            .unwrap();
        assert!(
            matches!(result, CommandResult::Written { .. }),
            "{result:?}"
        );
    }
    nodes[away].start(None);
    wait_converged(&nodes).await;

    let root = nodes[away].dir.join("regions/1");
    let active = std::fs::read_to_string(root.join("ACTIVE")).unwrap();
    // The received archive was installed, then kept (linked) as this node's own snapshot
    // to pass on; nothing of the stream is left.
    let files: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        files
            .iter()
            .any(|f| f.starts_with("snapshot-") && f.ends_with(".tar")),
        "{files:?}"
    );
    assert!(
        !files
            .iter()
            .any(|f| f.contains("receiving") || f.contains("partial")),
        "{files:?}"
    );
    assert_ne!(
        active.trim(),
        "db-0",
        "node {} caught up without installing a checkpoint",
        nodes[away].id
    );
    let reader = client_of(&[&nodes[away]], Duration::from_secs(5));
    for key in 0..DOCUMENTS {
        let found = reader
            .get(
                COLLECTION,
                format!("k{key}").as_bytes(),
                ReadConsistency::Local,
            )
            .await
            .unwrap();
        assert_eq!(
            value_of(found.as_ref().map(|d| d.json.as_slice())),
            key + 1,
            "k{key}"
        );
    }
}

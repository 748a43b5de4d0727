//! Starting, running and stopping the server.

use std::net::SocketAddr;
use std::sync::Arc;

use sift_index::DatabaseOptions;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{FsyncPolicy, ServerConfig};
use crate::connection;
use crate::durability::EverySecond;
use crate::keyspace::{Keyspace, KeyspaceError};
use crate::search::{SearchError, SearchIndexes};
use crate::session::{ServerStats, Shared};

/// Why the server could not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The settings were refused (`ServerConfig::validate`).
    #[error("{0}")]
    Config(String),
    /// The database could not be opened or closed.
    #[error("database {dir}: {source}")]
    Database {
        /// The database directory.
        dir: String,
        /// What failed.
        source: KeyspaceError,
    },
    /// A task of the server ended abnormally (a panic in it, or the runtime going away).
    #[error("{context}: {reason}")]
    Task {
        /// What the task was doing.
        context: String,
        /// Why it ended.
        reason: String,
    },
    /// Binding the address or another socket error.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
}

/// A running server: its address, and the handle to stop it.
#[derive(Debug)]
pub struct RunningServer {
    address: SocketAddr,
    shutdown: CancellationToken,
    finished: tokio::task::JoinHandle<Result<(), ServerError>>,
}

impl RunningServer {
    /// The address it listens on (with the port actually bound).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Asks it to stop: no new connections; each client's requests already received are
    /// answered; then the database is closed.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Waits until it stopped and the database is closed.
    pub async fn wait(self) -> Result<(), ServerError> {
        match self.finished.await {
            Ok(result) => result,
            Err(error) => Err(task_failed("serving clients")(error)),
        }
    }
}

/// The error for a task that did not finish normally while doing `context`.
fn task_failed(context: &'static str) -> impl FnOnce(tokio::task::JoinError) -> ServerError {
    move |error| ServerError::Task {
        context: context.to_owned(),
        reason: error.to_string(),
    }
}

/// Opens the database, binds, and starts accepting clients (inside a tokio runtime with the
/// multi-threaded scheduler).
pub async fn start(config: ServerConfig) -> Result<RunningServer, ServerError> {
    config.validate().map_err(ServerError::Config)?;
    let dir = config.db_dir.display().to_string();
    let mut options = DatabaseOptions {
        sync_writes: config.fsync == FsyncPolicy::Always,
        ..DatabaseOptions::default()
    };
    if let Some(bytes) = config.memtable_bytes_max {
        options.engine.memtable_bytes_max = bytes;
    }
    if let Some(bytes) = config.block_cache_bytes {
        options.engine.block_cache_bytes = bytes;
    }
    let db_dir = config.db_dir.clone();
    let (keyspace, search) = tokio::task::spawn_blocking(move || {
        let keyspace = Arc::new(Keyspace::open(&db_dir, options)?);
        let search = SearchIndexes::open(&keyspace).map_err(|error| match error {
            SearchError::Keyspace(error) => error,
            SearchError::Refused(reason) => KeyspaceError::Damaged {
                key: "search indexes".to_owned(),
                reason,
            },
        })?;
        Ok::<_, KeyspaceError>((keyspace, search))
    })
    .await
    .map_err(task_failed("opening the database"))?
    .map_err(|source| ServerError::Database {
        dir: dir.clone(),
        source,
    })?;
    let listener = match TcpListener::bind(config.address()).await {
        Ok(listener) => listener,
        Err(source) => {
            // The index builds started at open hold the keyspace: stop them before failing.
            tokio::task::spawn_blocking(move || search.stop())
                .await
                .map_err(task_failed("stopping the search index builds"))?;
            return Err(ServerError::Io {
                context: format!("binding {}", config.address()),
                source,
            });
        }
    };
    let address = listener.local_addr().map_err(|source| ServerError::Io {
        context: "reading the bound address".to_owned(),
        source,
    })?;
    let fsync = config.fsync;
    let shared = Arc::new(Shared::new(keyspace, search, config, address.port()));
    let syncer = match fsync {
        FsyncPolicy::EverySecond => Some(EverySecond::start(Arc::clone(&shared)).map_err(
            |source| ServerError::Io {
                context: "starting the fsync thread".to_owned(),
                source,
            },
        )?),
        FsyncPolicy::Always | FsyncPolicy::No => None,
    };
    let shutdown = CancellationToken::new();
    tracing::info!(%address, fsync = fsync.name(), "ready to accept connections");
    let finished = tokio::spawn(accept_loop(listener, shared, syncer, shutdown.clone(), dir));
    Ok(RunningServer {
        address,
        shutdown,
        finished,
    })
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    syncer: Option<EverySecond>,
    shutdown: CancellationToken,
    dir: String,
) -> Result<(), ServerError> {
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors and the like: keep serving the clients already connected.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        ServerStats::add(&shared.stats.total_connections_received, 1);
        let connected = shared
            .stats
            .connected_clients
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        if connected as usize >= shared.config.maxclients {
            shared
                .stats
                .connected_clients
                .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            ServerStats::add(&shared.stats.rejected_connections, 1);
            connections.spawn(refuse(stream));
            continue;
        }
        let _ = stream.set_nodelay(true);
        let shared = Arc::clone(&shared);
        let shutdown = shutdown.clone();
        connections.spawn(async move {
            connection::serve(Arc::clone(&shared), stream, peer, shutdown).await;
            shared
                .stats
                .connected_clients
                .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        });
    }
    drop(listener);
    tracing::info!("shutting down: answering the requests already received");
    connections.close();
    connections.wait().await;
    if let Some(syncer) = syncer {
        syncer.stop();
    }
    let Ok(shared) = Arc::try_unwrap(shared) else {
        // Every connection task and the fsync thread have ended, so nothing else holds it.
        return Err(ServerError::Task {
            context: "closing the database".to_owned(),
            reason: "the server state is still held by a task".to_owned(),
        });
    };
    // A search index build holds the keyspace: stop it between two fields (the next open
    // resumes it).
    let search = shared.search;
    tokio::task::spawn_blocking(move || search.stop())
        .await
        .map_err(task_failed("stopping the search index builds"))?;
    let Ok(keyspace) = Arc::try_unwrap(shared.keyspace) else {
        return Err(ServerError::Task {
            context: "closing the database".to_owned(),
            reason: "the keyspace is still held by a search index build".to_owned(),
        });
    };
    let database = keyspace.into_database();
    tokio::task::spawn_blocking(move || database.close())
        .await
        .map_err(task_failed("closing the database"))?
        .map_err(|source| ServerError::Database {
            dir,
            source: KeyspaceError::Database(source),
        })?;
    tracing::info!("database closed");
    Ok(())
}

async fn refuse(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let _ = stream
        .write_all(b"-ERR max number of clients reached\r\n")
        .await;
}

/// Runs a server until Ctrl-C or SIGTERM, then stops it cleanly.
pub fn run(config: ServerConfig) -> Result<(), ServerError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_threads)
        .thread_name("sift-serve")
        .enable_all()
        .build()
        .map_err(|source| ServerError::Io {
            context: "starting the runtime".to_owned(),
            source,
        })?;
    runtime.block_on(async {
        let server = start(config).await?;
        wait_for_signal().await;
        server.shutdown();
        server.wait().await
    })
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => tracing::info!("Ctrl-C received"),
                    _ = terminate.recv() => tracing::info!("SIGTERM received"),
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

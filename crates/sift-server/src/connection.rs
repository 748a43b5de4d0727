//! One client connection: read requests, run them in order, write the replies.
//!
//! Every complete request already received is run before the next read, and the replies of
//! a pipeline go out together. Memory per client is bounded: an incomplete request by the
//! decoder's limits, replies by `reply_buffer_bytes` — past it the server writes to the
//! client before it runs anything more, so a client that never reads stops being read (and
//! is disconnected after `reply_stall_timeout`).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use sift_resp::{encode_reply, Reply, RequestDecoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use crate::command;
use crate::config::FsyncPolicy;
use crate::session::{Client, ServerStats, Shared};

/// Bytes asked of the socket per read.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Why a connection ended early.
enum Closed {
    /// The peer went away, an I/O error, or a write stalled: nothing more can be sent.
    Gone,
}

/// Serves one client until it quits, disconnects, breaks the protocol, idles out, or the
/// server shuts down (after the requests already received are answered).
pub(crate) async fn serve(
    shared: Arc<Shared>,
    mut stream: TcpStream,
    address: SocketAddr,
    shutdown: CancellationToken,
) {
    let mut client = Client::new(shared.new_client_id(), address);
    tracing::debug!(client = client.id, %address, "connected");
    let mut decoder = RequestDecoder::new(shared.config.request_limits);
    let mut input = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut output = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let outcome = loop {
        match run_received(
            &shared,
            &mut client,
            &mut decoder,
            &mut input,
            &mut output,
            &mut stream,
        )
        .await
        {
            Ok(true) => {}
            Ok(false) | Err(Closed::Gone) => break "closed",
        }
        if shutdown.is_cancelled() {
            break "server shutting down";
        }
        input.reserve(READ_CHUNK_BYTES);
        let read = tokio::select! {
            () = shutdown.cancelled() => break "server shutting down",
            read = read_with_idle_timeout(&shared, &mut stream, &mut input) => read,
        };
        match read {
            Some(0) => break "peer closed",
            Some(bytes) => ServerStats::add(&shared.stats.total_net_input_bytes, bytes as u64),
            None => break "idle or read error",
        }
    };
    tracing::debug!(client = client.id, %address, outcome, "disconnected");
}

async fn read_with_idle_timeout(
    shared: &Shared,
    stream: &mut TcpStream,
    input: &mut BytesMut,
) -> Option<usize> {
    let read = stream.read_buf(input);
    match shared.config.idle_timeout {
        None => read.await.ok(),
        Some(limit) => {
            let result = tokio::time::timeout(limit, read).await;
            if result.is_err() {
                ServerStats::add(&shared.stats.idle_disconnects, 1);
            }
            result.ok().and_then(Result::ok)
        }
    }
}

/// Runs every complete request in `input` and sends the replies. `Ok(false)`: the
/// connection must close (QUIT, or a protocol error that was answered).
async fn run_received(
    shared: &Shared,
    client: &mut Client,
    decoder: &mut RequestDecoder,
    input: &mut BytesMut,
    output: &mut BytesMut,
    stream: &mut TcpStream,
) -> Result<bool, Closed> {
    let mut requests = Vec::new();
    let mut protocol_error = None;
    loop {
        match decoder.decode_request(input) {
            Ok(Some(request)) => requests.push(request.arguments),
            Ok(None) => break,
            Err(error) => {
                ServerStats::add(&shared.stats.protocol_errors, 1);
                tracing::debug!(client = client.id, %error, "protocol error");
                protocol_error = Some(Reply::error(format!("ERR {error}")));
                break;
            }
        }
    }
    let mut next = 0;
    while next < requests.len() {
        // A run of plain SETs (a pipeline of writes) is stored as one batch.
        let run = if client.needs_auth(shared) || client.transaction.is_some() {
            1
        } else {
            requests[next..]
                .iter()
                .take_while(|arguments| command::is_plain_set(arguments))
                .count()
                .max(1)
        };
        let batch = &requests[next..next + run];
        next += run;
        let replies = run_blocking(shared, &batch[0], || {
            if run > 1 {
                let requests: Vec<&[Bytes]> = batch.iter().map(Vec::as_slice).collect();
                command::set_many(shared, &requests)
            } else {
                vec![command::execute(shared, client, &batch[0])]
            }
        });
        ServerStats::add(&shared.stats.total_commands_processed, replies.len() as u64);
        for reply in &replies {
            if reply.is_error() {
                ServerStats::add(&shared.stats.total_error_replies, 1);
            }
            encode_reply(reply, client.protocol, output);
        }
        if client.closing {
            send(shared, stream, output).await?;
            return Ok(false);
        }
        if output.len() >= shared.config.reply_buffer_bytes {
            send(shared, stream, output).await?;
        }
    }
    if let Some(reply) = &protocol_error {
        encode_reply(reply, client.protocol, output);
    }
    send(shared, stream, output).await?;
    Ok(protocol_error.is_none())
}

/// Runs `work` (commands on the engine). Work that can hold its thread for long moves this
/// worker's other connections elsewhere first (`block_in_place`): with `--fsync always` a
/// write waits for a disk sync; FT.INFO scans an index's prefixes, FT.CREATE and FT.DROPINDEX
/// may wait for a back-fill or delete many keys; EXEC runs a whole transaction (and may wait
/// for every other command to finish); while a search index is back-filled, writes wait for
/// it. FT.SEARCH runs in place like other reads: handing the worker over per query cost 11%
/// of range-query throughput and doubled its tail latency (`bench/compare-search.sh`), and a
/// long one leaves the worker's queued connections to the other workers to steal.
fn run_blocking<T>(shared: &Shared, first: &[Bytes], work: impl FnOnce() -> T) -> T {
    let long = shared.config.fsync == FsyncPolicy::Always
        || shared.search.is_building()
        || first.first().is_some_and(|name| {
            [&b"FT.INFO"[..], b"FT.CREATE", b"FT.DROPINDEX", b"EXEC"]
                .iter()
                .any(|long| name.eq_ignore_ascii_case(long))
        });
    if long {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

/// Writes `output` to the client, giving up after `reply_stall_timeout`.
async fn send(
    shared: &Shared,
    stream: &mut TcpStream,
    output: &mut BytesMut,
) -> Result<(), Closed> {
    if output.is_empty() {
        return Ok(());
    }
    let bytes = output.len() as u64;
    match tokio::time::timeout(shared.config.reply_stall_timeout, stream.write_all(output)).await {
        Ok(Ok(())) => {
            ServerStats::add(&shared.stats.total_net_output_bytes, bytes);
            output.clear();
            Ok(())
        }
        Ok(Err(_)) => Err(Closed::Gone),
        Err(_) => {
            ServerStats::add(&shared.stats.reply_stall_disconnects, 1);
            Err(Closed::Gone)
        }
    }
}

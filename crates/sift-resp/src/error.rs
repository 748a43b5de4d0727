//! What a client sent that is not a request.

/// A request that breaks the protocol or the limits. The server answers it with
/// `-ERR Protocol error: …` (the text of [`ProtocolError::to_string`]) and closes the
/// connection, as Redis does: after a framing error the rest of the stream cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A header line (`*count`, `$length` or an inline command) ran past the limit without CRLF.
    #[error("Protocol error: too big {what} (more than {limit_bytes} bytes without CRLF)")]
    LineTooLong {
        /// `mbulk count string`, `bulk count string` or `inline request`.
        what: &'static str,
        /// The limit that was passed.
        limit_bytes: usize,
    },
    /// `*count` that is not an integer, or more arguments than allowed.
    #[error("Protocol error: invalid multibulk length")]
    InvalidArgumentCount,
    /// An element of the request array that is not a bulk string.
    #[error("Protocol error: expected '$', got '{found}'")]
    ExpectedBulk {
        /// The byte found instead of `$`, printable or escaped.
        found: String,
    },
    /// `$length` that is not an integer, negative, or over the bulk limit.
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// A bulk string not followed by CRLF.
    #[error("Protocol error: bulk string not terminated by CRLF")]
    UnterminatedBulk,
    /// The whole request is larger than the request limit.
    #[error(
        "Protocol error: request of {length_bytes} bytes is over the limit of {limit_bytes} bytes"
    )]
    RequestTooLarge {
        /// What the headers claim.
        length_bytes: u64,
        /// The limit.
        limit_bytes: usize,
    },
    /// An inline command with a quote that is not closed (or not followed by a space).
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// What the headers delimited did not decode as an array of bulk strings.
    #[error("Protocol error: {reason}")]
    Malformed {
        /// The decoder's reason.
        reason: String,
    },
}

//! What one request may claim and occupy.

/// Limits on one request, checked on its headers before its payload is buffered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// Largest bulk string (`proto-max-bulk-len`; Redis's default is 512 MiB).
    pub bulk_bytes_max: usize,
    /// Most arguments in one request (Redis allows 1024 × 1024 × 1024; clients never need
    /// more than a pipeline's worth, and each argument costs a `Bytes` handle).
    pub arguments_max: usize,
    /// Longest header or inline line without CRLF (Redis's `PROTO_INLINE_MAX_SIZE`, 64 KiB).
    pub line_bytes_max: usize,
    /// Largest whole request, headers included (Redis's `client-query-buffer-limit`, 1 GiB).
    /// This bounds what one client can make the server hold for its next request.
    pub request_bytes_max: usize,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            bulk_bytes_max: 512 * 1024 * 1024,
            arguments_max: 1024 * 1024,
            line_bytes_max: 64 * 1024,
            request_bytes_max: 1024 * 1024 * 1024,
        }
    }
}

//! Client bytes → requests: a resumable walk over the headers that enforces
//! [`RequestLimits`], then `redis-protocol`'s decoder on exactly one complete request.

use bytes::{Buf, Bytes, BytesMut};
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::types::{BytesFrame, Resp2Frame};

use crate::error::ProtocolError;
use crate::inline::split_inline;
use crate::limits::RequestLimits;

/// One command as the client sent it: its name and arguments, binary-safe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `arguments[0]` is the command name. Never empty.
    pub arguments: Vec<Bytes>,
}

/// How far the walk over the request at the front of the buffer got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// No request started.
    Idle,
    /// In a `*count` request: `remaining` bulk strings still to check, the next at `offset`.
    Bulks { remaining: usize, offset: usize },
}

/// Decodes requests from a connection's read buffer. Bytes the
/// decoder returns `None` for stay in the buffer; the walk resumes where it stopped, so a
/// request arriving in many pieces is scanned once.
#[derive(Debug, Clone)]
pub struct RequestDecoder {
    limits: RequestLimits,
    progress: Progress,
}

impl RequestDecoder {
    /// A decoder enforcing `limits`.
    pub fn new(limits: RequestLimits) -> RequestDecoder {
        RequestDecoder {
            limits,
            progress: Progress::Idle,
        }
    }

    /// The next complete request at the front of `buffer`, removing its bytes; `None` when
    /// more bytes are needed. Empty requests (`*0`, blank inline lines) are skipped, as Redis
    /// skips them. After an error the connection must be closed: the decoder's position is
    /// lost.
    pub fn decode_request(
        &mut self,
        buffer: &mut BytesMut,
    ) -> Result<Option<Request>, ProtocolError> {
        loop {
            let (remaining, mut offset) = match self.progress {
                Progress::Idle => {
                    let Some(&first) = buffer.first() else {
                        return Ok(None);
                    };
                    if first != b'*' {
                        match self.inline(buffer)? {
                            Inline::Incomplete => return Ok(None),
                            Inline::Empty => continue,
                            Inline::Request(request) => return Ok(Some(request)),
                        }
                    }
                    let Some(line_end) = self.line_end(buffer, 1, "mbulk count string")? else {
                        return Ok(None);
                    };
                    let count = parse_length(&buffer[1..line_end])
                        .ok_or(ProtocolError::InvalidArgumentCount)?;
                    if count > self.limits.arguments_max as i64 {
                        return Err(ProtocolError::InvalidArgumentCount);
                    }
                    if count <= 0 {
                        buffer.advance(line_end + 2);
                        continue;
                    }
                    (count as usize, line_end + 2)
                }
                Progress::Bulks { remaining, offset } => (remaining, offset),
            };
            let mut remaining = remaining;
            while remaining > 0 {
                let Some(&marker) = buffer.get(offset) else {
                    self.progress = Progress::Bulks { remaining, offset };
                    return Ok(None);
                };
                if marker != b'$' {
                    return Err(ProtocolError::ExpectedBulk {
                        found: std::ascii::escape_default(marker).to_string(),
                    });
                }
                let Some(line_end) = self.line_end(buffer, offset + 1, "bulk count string")? else {
                    self.progress = Progress::Bulks { remaining, offset };
                    return Ok(None);
                };
                let length = parse_length(&buffer[offset + 1..line_end])
                    .filter(|&length| {
                        length >= 0 && length as u64 <= self.limits.bulk_bytes_max as u64
                    })
                    .ok_or(ProtocolError::InvalidBulkLength)? as usize;
                let end = line_end + 2 + length + 2;
                // The bulks still to come are at least 4 bytes each (`$0\r\n` + CRLF).
                let claimed = end as u64 + (remaining as u64 - 1) * 6;
                if claimed > self.limits.request_bytes_max as u64 {
                    return Err(ProtocolError::RequestTooLarge {
                        length_bytes: claimed,
                        limit_bytes: self.limits.request_bytes_max,
                    });
                }
                if buffer.len() < end {
                    self.progress = Progress::Bulks { remaining, offset };
                    return Ok(None);
                }
                if &buffer[end - 2..end] != b"\r\n" {
                    return Err(ProtocolError::UnterminatedBulk);
                }
                offset = end;
                remaining -= 1;
            }
            self.progress = Progress::Idle;
            let mut frame = buffer.split_to(offset);
            return decode_frame(&mut frame).map(Some);
        }
    }

    /// The offset of the CR of the first CRLF at or after `from`, or `None` if it has not
    /// arrived yet; an error once `line_bytes_max` bytes passed without one.
    fn line_end(
        &self,
        buffer: &BytesMut,
        from: usize,
        what: &'static str,
    ) -> Result<Option<usize>, ProtocolError> {
        let window_end = buffer.len().min(from + self.limits.line_bytes_max + 2);
        let found = buffer[from..window_end]
            .windows(2)
            .position(|pair| pair == b"\r\n");
        match found {
            Some(position) => Ok(Some(from + position)),
            None if buffer.len() - from > self.limits.line_bytes_max => {
                Err(ProtocolError::LineTooLong {
                    what,
                    limit_bytes: self.limits.line_bytes_max,
                })
            }
            None => Ok(None),
        }
    }

    fn inline(&self, buffer: &mut BytesMut) -> Result<Inline, ProtocolError> {
        let window_end = buffer.len().min(self.limits.line_bytes_max + 1);
        let Some(newline) = buffer[..window_end].iter().position(|&byte| byte == b'\n') else {
            if buffer.len() > self.limits.line_bytes_max {
                return Err(ProtocolError::LineTooLong {
                    what: "inline request",
                    limit_bytes: self.limits.line_bytes_max,
                });
            }
            return Ok(Inline::Incomplete);
        };
        let line = buffer.split_to(newline + 1).freeze();
        let text = line.slice(..newline);
        let text = text.strip_suffix(b"\r").unwrap_or(&text);
        let arguments = split_inline(text)?;
        if arguments.is_empty() {
            return Ok(Inline::Empty);
        }
        if arguments.len() > self.limits.arguments_max {
            return Err(ProtocolError::InvalidArgumentCount);
        }
        Ok(Inline::Request(Request {
            arguments: arguments.into_iter().map(Bytes::from).collect(),
        }))
    }
}

enum Inline {
    Incomplete,
    Empty,
    Request(Request),
}

/// A decimal length as Redis writes it: an optional `-`, then digits, no spaces.
fn parse_length(text: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(text).ok()?;
    if text.is_empty() || text.starts_with('+') {
        return None;
    }
    text.parse().ok()
}

/// One request the walk delimited, decoded by `redis-protocol`.
fn decode_frame(frame: &mut BytesMut) -> Result<Request, ProtocolError> {
    let malformed = |reason: String| ProtocolError::Malformed { reason };
    let decoded = decode_bytes_mut(frame).map_err(|error| malformed(error.to_string()))?;
    let Some((BytesFrame::Array(items), _, _)) = decoded else {
        return Err(malformed("the request is not an array".to_owned()));
    };
    let arguments = items
        .into_iter()
        .map(|item| match item {
            BytesFrame::BulkString(bytes) => Ok(bytes),
            other => Err(malformed(format!(
                "expected a bulk string, got {:?}",
                other.kind()
            ))),
        })
        .collect::<Result<Vec<Bytes>, ProtocolError>>()?;
    Ok(Request { arguments })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoder() -> RequestDecoder {
        RequestDecoder::new(RequestLimits {
            bulk_bytes_max: 100,
            arguments_max: 4,
            line_bytes_max: 16,
            request_bytes_max: 300,
        })
    }

    fn words(request: &Request) -> Vec<&[u8]> {
        request.arguments.iter().map(Bytes::as_ref).collect()
    }

    #[test]
    fn a_request_split_at_every_byte_decodes_once_whole() {
        let wire = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nv\r\nxx\r\n*1\r\n$4\r\nPING\r\n";
        for cut in 0..wire.len() {
            let mut decoder = decoder();
            let mut buffer = BytesMut::from(&wire[..cut]);
            let mut decoded = Vec::new();
            while let Some(request) = decoder.decode_request(&mut buffer).expect("valid") {
                decoded.push(request);
            }
            buffer.extend_from_slice(&wire[cut..]);
            while let Some(request) = decoder.decode_request(&mut buffer).expect("valid") {
                decoded.push(request);
            }
            assert_eq!(decoded.len(), 2, "cut at {cut}");
            assert_eq!(words(&decoded[0]), [b"SET".as_slice(), b"k", b"v\r\nxx"]);
            assert_eq!(words(&decoded[1]), [b"PING".as_slice()]);
            assert!(buffer.is_empty());
        }
    }

    #[test]
    fn lengths_over_the_limits_are_refused_before_their_bytes_arrive() {
        let cases: [(&[u8], ProtocolError); 5] = [
            (b"*5\r\n", ProtocolError::InvalidArgumentCount),
            (b"*x\r\n", ProtocolError::InvalidArgumentCount),
            (b"*1\r\n$101\r\n", ProtocolError::InvalidBulkLength),
            (b"*1\r\n$-1\r\n", ProtocolError::InvalidBulkLength),
            (
                b"*1\r\n+OK\r\n",
                ProtocolError::ExpectedBulk { found: "+".into() },
            ),
        ];
        for (wire, expected) in cases {
            let mut buffer = BytesMut::from(wire);
            let got = decoder().decode_request(&mut buffer);
            assert_eq!(got, Err(expected), "{}", String::from_utf8_lossy(wire));
        }
    }

    #[test]
    fn a_request_over_the_total_limit_is_refused_at_the_header_that_passes_it() {
        // Four bulks of 100 bytes cannot fit in 300: with the third header the claim is
        // 328 bytes so far plus at least 6 for the last bulk, before the third payload
        // arrives.
        let mut buffer = BytesMut::from(&b"*4\r\n$100\r\n"[..]);
        assert_eq!(decoder().decode_request(&mut buffer), Ok(None));
        buffer.extend_from_slice(&[b'a'; 100]);
        buffer.extend_from_slice(b"\r\n$100\r\n");
        buffer.extend_from_slice(&[b'a'; 100]);
        buffer.extend_from_slice(b"\r\n$100\r\n");
        assert!(matches!(
            decoder().decode_request(&mut buffer),
            Err(ProtocolError::RequestTooLarge {
                limit_bytes: 300,
                ..
            })
        ));
    }

    #[test]
    fn a_header_without_crlf_is_refused_at_the_line_limit() {
        let mut buffer = BytesMut::from(&b"*1\r\n$"[..]);
        buffer.extend_from_slice(&[b'9'; 16]);
        assert_eq!(decoder().decode_request(&mut buffer), Ok(None));
        buffer.extend_from_slice(b"9");
        assert!(matches!(
            decoder().decode_request(&mut buffer),
            Err(ProtocolError::LineTooLong {
                what: "bulk count string",
                ..
            })
        ));
        let mut buffer = BytesMut::from(&[b'P'; 17][..]);
        assert!(matches!(
            decoder().decode_request(&mut buffer),
            Err(ProtocolError::LineTooLong {
                what: "inline request",
                ..
            })
        ));
    }

    #[test]
    fn a_bulk_not_followed_by_crlf_is_refused() {
        let mut buffer = BytesMut::from(&b"*1\r\n$2\r\nabcd"[..]);
        assert_eq!(
            decoder().decode_request(&mut buffer),
            Err(ProtocolError::UnterminatedBulk)
        );
    }

    #[test]
    fn empty_requests_are_skipped_and_inline_commands_split_into_words() {
        let mut buffer = BytesMut::from(&b"*0\r\n\r\n  \nSET k \"a b\"\r\n"[..]);
        let mut decoder = decoder();
        let request = decoder
            .decode_request(&mut buffer)
            .expect("valid")
            .expect("complete");
        assert_eq!(words(&request), [b"SET".as_slice(), b"k", b"a b"]);
        assert!(buffer.is_empty());
    }
}

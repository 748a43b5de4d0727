//! Inline commands: one line of words, as typed into `telnet` or `nc`.
//!
//! Words are separated by spaces or tabs. A word may be quoted: `"…"` with the escapes
//! `\n \r \t \b \a \\ \" \xHH`, or `'…'` with `\'` only. A closing quote must be followed by
//! a space or the end of the line. These are Redis's rules (`sdssplitargs`).

use crate::error::ProtocolError;

/// The words of one inline line (without its line ending).
pub(crate) fn split_inline(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let mut words = Vec::new();
    let mut at = 0;
    loop {
        while at < line.len() && line[at].is_ascii_whitespace() {
            at += 1;
        }
        if at == line.len() {
            return Ok(words);
        }
        let (word, next) = match line[at] {
            b'"' => double_quoted(line, at + 1)?,
            b'\'' => single_quoted(line, at + 1)?,
            _ => {
                let end = line[at..]
                    .iter()
                    .position(u8::is_ascii_whitespace)
                    .map_or(line.len(), |length| at + length);
                (line[at..end].to_vec(), end)
            }
        };
        words.push(word);
        at = next;
    }
}

/// The word of a `"…"` starting after the quote at `at`, and where the next word may start.
fn double_quoted(line: &[u8], mut at: usize) -> Result<(Vec<u8>, usize), ProtocolError> {
    let mut word = Vec::new();
    loop {
        match line.get(at) {
            None => return Err(ProtocolError::UnbalancedQuotes),
            Some(b'\\') if at + 3 < line.len() && line[at + 1] == b'x' => {
                let hex = std::str::from_utf8(&line[at + 2..at + 4]).ok();
                if let Some(byte) = hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                    word.push(byte);
                    at += 4;
                } else {
                    word.push(b'x');
                    at += 2;
                }
            }
            Some(b'\\') if at + 1 < line.len() => {
                word.push(match line[at + 1] {
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'b' => 0x08,
                    b'a' => 0x07,
                    other => other,
                });
                at += 2;
            }
            Some(b'"') => return closed(line, at + 1).map(|next| (word, next)),
            Some(&byte) => {
                word.push(byte);
                at += 1;
            }
        }
    }
}

/// The word of a `'…'` starting after the quote at `at`, and where the next word may start.
fn single_quoted(line: &[u8], mut at: usize) -> Result<(Vec<u8>, usize), ProtocolError> {
    let mut word = Vec::new();
    loop {
        match line.get(at) {
            None => return Err(ProtocolError::UnbalancedQuotes),
            Some(b'\\') if line.get(at + 1) == Some(&b'\'') => {
                word.push(b'\'');
                at += 2;
            }
            Some(b'\'') => return closed(line, at + 1).map(|next| (word, next)),
            Some(&byte) => {
                word.push(byte);
                at += 1;
            }
        }
    }
}

/// After a closing quote: the end of the line or a space, else the quotes are unbalanced.
fn closed(line: &[u8], at: usize) -> Result<usize, ProtocolError> {
    match line.get(at) {
        None => Ok(at),
        Some(byte) if byte.is_ascii_whitespace() => Ok(at),
        Some(_) => Err(ProtocolError::UnbalancedQuotes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_quotes_and_escapes_split_as_redis_splits_them() {
        let split = |line: &str| split_inline(line.as_bytes());
        let words = |list: &[&str]| Ok(list.iter().map(|w| w.as_bytes().to_vec()).collect());
        assert_eq!(split("  SET  key\tvalue "), words(&["SET", "key", "value"]));
        assert_eq!(split(r#"SET "a b" 'c d'"#), words(&["SET", "a b", "c d"]));
        assert_eq!(
            split(r#"ECHO "\x41\n\"" 'it\'s'"#),
            words(&["ECHO", "A\n\"", "it's"])
        );
        assert_eq!(split(r#"ECHO "\xZZ""#), words(&["ECHO", "xZZ"]));
        assert_eq!(split(""), words(&[]));
        assert_eq!(split(r#"ECHO "open"#), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(split(r#"ECHO "a"b"#), Err(ProtocolError::UnbalancedQuotes));
        assert_eq!(split("ECHO 'a"), Err(ProtocolError::UnbalancedQuotes));
    }
}

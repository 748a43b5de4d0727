//! Redis's glob patterns (`KEYS`, `SCAN … MATCH`): `*`, `?`, `[abc]`, `[^a]`, `[a-z]`, and
//! `\` to take the next byte literally. Bytes, not characters, as Redis matches them.

/// Whether `text` matches `pattern`. Linear in practice: a `*` is retried from one place
/// only (the latest star), which is enough because a later star can absorb anything an
/// earlier one would.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the latest star: (pattern index after it, text index it took).
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, t));
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    let (matched, next) = class_match(pattern, p, text[t]);
                    if matched {
                        p = next;
                        t += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == text[t] {
                        p += 2;
                        t += 1;
                        continue;
                    }
                }
                byte => {
                    if byte == text[t] {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((after, taken)) => {
                p = after;
                t = taken + 1;
                star = Some((after, taken + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&byte| byte == b'*')
}

/// Whether `byte` is in the class starting at `pattern[open] == b'['`, and the index after the
/// class's `]` (an unclosed class runs to the end of the pattern, as in Redis).
fn class_match(pattern: &[u8], open: usize, byte: u8) -> (bool, usize) {
    let mut at = open + 1;
    let negated = pattern.get(at) == Some(&b'^');
    if negated {
        at += 1;
    }
    let mut matched = false;
    while at < pattern.len() && pattern[at] != b']' {
        if pattern[at] == b'\\' && at + 1 < pattern.len() {
            matched |= pattern[at + 1] == byte;
            at += 2;
        } else if at + 2 < pattern.len() && pattern[at + 1] == b'-' && pattern[at + 2] != b']' {
            let (low, high) = (
                pattern[at].min(pattern[at + 2]),
                pattern[at].max(pattern[at + 2]),
            );
            matched |= (low..=high).contains(&byte);
            at += 3;
        } else {
            matched |= pattern[at] == byte;
            at += 1;
        }
    }
    let next = (at + 1).min(pattern.len());
    (matched != negated, next)
}

/// The literal bytes every match starts with (before the first special byte): a scan can
/// start there.
pub fn literal_prefix(pattern: &[u8]) -> Vec<u8> {
    let mut prefix = Vec::new();
    let mut at = 0;
    while at < pattern.len() {
        match pattern[at] {
            b'\\' if at + 1 < pattern.len() => {
                prefix.push(pattern[at + 1]);
                at += 2;
            }
            b'*' | b'?' | b'[' | b'\\' => break,
            byte => {
                prefix.push(byte);
                at += 1;
            }
        }
    }
    prefix
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A direct recursive reading of the rules: the model the fast matcher is checked against.
    fn model(pattern: &[u8], text: &[u8]) -> bool {
        match pattern.first() {
            None => text.is_empty(),
            Some(b'*') => (0..=text.len()).any(|skip| model(&pattern[1..], &text[skip..])),
            Some(b'?') => !text.is_empty() && model(&pattern[1..], &text[1..]),
            Some(b'[') => {
                let Some(&byte) = text.first() else {
                    return false;
                };
                let (matched, next) = class_match(pattern, 0, byte);
                matched && model(&pattern[next..], &text[1..])
            }
            Some(b'\\') if pattern.len() > 1 => {
                text.first() == Some(&pattern[1]) && model(&pattern[2..], &text[1..])
            }
            Some(&byte) => text.first() == Some(&byte) && model(&pattern[1..], &text[1..]),
        }
    }

    #[test]
    fn examples_from_the_redis_documentation() {
        assert!(glob_match(b"h?llo", b"hello"));
        assert!(glob_match(b"h*llo", b"heeeello"));
        assert!(glob_match(b"h[ae]llo", b"hallo"));
        assert!(!glob_match(b"h[ae]llo", b"hillo"));
        assert!(glob_match(b"h[^e]llo", b"hallo"));
        assert!(!glob_match(b"h[^e]llo", b"hello"));
        assert!(glob_match(b"h[a-b]llo", b"hbllo"));
        assert!(glob_match(b"h\\*llo", b"h*llo"));
        assert!(!glob_match(b"h\\*llo", b"hello"));
        assert!(glob_match(b"*", b""));
        assert!(glob_match(b"user:*:name", b"user:42:name"));
        assert!(!glob_match(b"user:*:name", b"user:42:age"));
    }

    #[test]
    fn the_matcher_agrees_with_the_recursive_model() {
        let alphabet = [b'a', b'b', b'*', b'?', b'[', b']', b'^', b'-', b'\\'];
        let texts: Vec<Vec<u8>> = (0..300u32)
            .map(|seed| {
                (0..seed % 6)
                    .map(|i| b"ab-]"[((seed * 7 + i * 3) % 4) as usize])
                    .collect()
            })
            .collect();
        for seed in 0..3000u32 {
            let pattern: Vec<u8> = (0..seed % 7)
                .map(|i| alphabet[((seed.wrapping_mul(2_654_435_761) >> (i * 3)) % 9) as usize])
                .collect();
            for text in &texts {
                assert_eq!(
                    glob_match(&pattern, text),
                    model(&pattern, text),
                    "pattern {:?} text {:?}",
                    String::from_utf8_lossy(&pattern),
                    String::from_utf8_lossy(text)
                );
            }
        }
    }

    #[test]
    fn the_literal_prefix_stops_at_the_first_special_byte() {
        assert_eq!(literal_prefix(b"user:*"), b"user:");
        assert_eq!(literal_prefix(b"a\\*b?"), b"a*b");
        assert_eq!(literal_prefix(b"*x"), b"");
    }
}

//! This process's I/O counters from /proc/self/io: an engine-independent measure of bytes
//! written, for engines that keep no counters of their own.

/// `wchar` of /proc/self/io: bytes this process passed to write(2) and similar calls,
/// whether or not they reached the disk yet. `None` where /proc is unavailable.
pub fn written_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    field(&text, "wchar")
}

/// The value of `name: value` in /proc/<pid>/io text.
pub fn field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == name)
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_io_fields() {
        let text = "rchar: 12\nwchar: 3456\nsyscr: 7\nwrite_bytes: 8192\n";
        assert_eq!(field(text, "wchar"), Some(3456));
        assert_eq!(field(text, "write_bytes"), Some(8192));
        assert_eq!(field(text, "missing"), None);
        assert_eq!(field("wchar: x\n", "wchar"), None);
    }

    #[test]
    fn counts_this_process_writes_on_linux() {
        let Some(before) = written_bytes() else {
            return; // No /proc (not Linux): nothing to check.
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), vec![0_u8; 100_000]).unwrap();
        let after = written_bytes().unwrap();
        assert!(after >= before + 100_000, "{before} -> {after}");
    }
}

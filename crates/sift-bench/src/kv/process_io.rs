//! This process's I/O counters from /proc/self/io (through the `procfs` crate): an
//! engine-independent measure of bytes written, for engines that keep no counters of their own.

/// `wchar` of /proc/self/io: bytes this process passed to write(2) and similar calls,
/// whether or not they reached the disk yet. `None` where /proc is unavailable.
pub fn written_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        procfs::process::Process::myself()
            .and_then(|process| process.io())
            .ok()
            .map(|io| io.wchar)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

//! What the end-to-end tests share: running the `sift` binary.

use std::process::Command;

/// Runs `sift` with `args`: whether it succeeded, its stdout and its stderr.
pub fn sift(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sift"))
        .args(args)
        .output()
        .expect("run sift");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

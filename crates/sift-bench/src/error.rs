//! The one error of the harness: a benchmark failure, with a message ready for the user.

/// A benchmark failure: what went wrong, ready for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchError {
    message: String,
}

impl BenchError {
    pub fn new(message: impl Into<String>) -> BenchError {
        BenchError {
            message: message.into(),
        }
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BenchError {}

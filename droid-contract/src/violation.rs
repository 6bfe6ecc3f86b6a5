//! A rule a request broke, with the JSON path of the offending value.

use std::fmt;

/// One broken rule: where (`$.context.repo_root`) and what, in words a caller can act on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Violation {
    /// JSON path of the offending value, `$` being the request itself.
    pub path: String,
    /// What is wrong, lowercase, naming the limit or the expected shape.
    pub message: String,
}

impl Violation {
    /// A violation at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every rule a request broke, in document order. Never empty when returned as an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid request: {}", join(.0))]
pub struct Violations(pub Vec<Violation>);

fn join(list: &[Violation]) -> String {
    list.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl Violations {
    /// The violations as a slice.
    pub fn as_slice(&self) -> &[Violation] {
        &self.0
    }
}

//! Bounded text and number newtypes: each constructor enforces its rule, so a value that exists is
//! valid. Lengths count Unicode scalar values (what a caller sees as characters), not bytes.

use serde::{Deserialize, Serialize};

/// Longest objective, in characters.
pub(crate) const OBJECTIVE_MAX: usize = 50_000;
/// Longest instructions, in characters.
pub const INSTRUCTIONS_MAX: usize = 100_000;
/// Longest constraint or acceptance criterion, in characters.
pub(crate) const LIST_ITEM_MAX: usize = 2_000;
/// Longest suggested command, in characters.
pub(crate) const COMMAND_MAX: usize = 4_000;
/// Longest task id, in characters.
pub(crate) const TASK_ID_MAX: usize = 128;
/// Longest allowed `max_runtime_seconds` (one day).
pub(crate) const RUNTIME_MAX: u32 = 86_400;

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// A string newtype limited to `$max` characters (and non-blank when `$non_blank`), built only
/// through `TryFrom<String>`, serialized as the plain string.
macro_rules! bounded_text {
    ($(#[$doc:meta])* $name:ident, $max:expr, non_blank = $non_blank:expr, $extend:tt) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
        #[serde(try_from = "String", into = "String")]
        #[schemars(extend $extend)]
        pub struct $name(String);

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(value: String) -> Result<Self, String> {
                if $non_blank && value.trim().is_empty() {
                    return Err("must not be blank".into());
                }
                let n = chars(&value);
                if n > $max {
                    return Err(format!("is {n} characters; the limit is {}", $max));
                }
                Ok(Self(value))
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.0
            }
        }

        impl $name {
            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
    };
}

bounded_text!(
    /// What the task must achieve: non-blank, at most 50 000 characters.
    Objective, OBJECTIVE_MAX, non_blank = true, ("minLength" = 1, "maxLength" = 50000)
);
bounded_text!(
    /// How to do it, in detail: at most 100 000 characters, may be empty.
    Instructions, INSTRUCTIONS_MAX, non_blank = false, ("maxLength" = 100000)
);
bounded_text!(
    /// One constraint or acceptance criterion: non-blank, at most 2 000 characters.
    ListItem, LIST_ITEM_MAX, non_blank = true, ("minLength" = 1, "maxLength" = 2000)
);

/// A shell command line (run with `sh -c`): non-blank, at most 4 000 characters, no NUL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "String", into = "String")]
#[schemars(extend("minLength" = 1, "maxLength" = 4000))]
pub struct ShellCommand(String);

impl TryFrom<String> for ShellCommand {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        if value.contains('\0') {
            return Err("must not contain a NUL character".into());
        }
        let n = chars(&value);
        if value.trim().is_empty() {
            return Err("must not be blank".into());
        }
        if n > COMMAND_MAX {
            return Err(format!("is {n} characters; the limit is {COMMAND_MAX}"));
        }
        Ok(Self(value))
    }
}

impl From<ShellCommand> for String {
    fn from(v: ShellCommand) -> String {
        v.0
    }
}

impl ShellCommand {
    /// The command line.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The caller's id for the task, echoed back: 1–128 characters of `[A-Za-z0-9._:-]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "String", into = "String")]
#[schemars(extend("minLength" = 1, "maxLength" = 128, "pattern" = "^[A-Za-z0-9._:-]+$"))]
pub struct TaskId(String);

impl TryFrom<String> for TaskId {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        if value.is_empty() {
            return Err("must not be empty".into());
        }
        let n = chars(&value);
        if n > TASK_ID_MAX {
            return Err(format!("is {n} characters; the limit is {TASK_ID_MAX}"));
        }
        if let Some(bad) = value
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
        {
            return Err(format!(
                "contains {bad:?}; only letters, digits and . _ : - are allowed"
            ));
        }
        Ok(Self(value))
    }
}

impl From<TaskId> for String {
    fn from(v: TaskId) -> String {
        v.0
    }
}

impl TaskId {
    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The run's wall-clock budget in seconds: 1 to 86 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "u64", into = "u64")]
#[schemars(extend("minimum" = 1, "maximum" = 86400))]
pub struct Runtime(u32);

impl TryFrom<u64> for Runtime {
    type Error = String;
    fn try_from(value: u64) -> Result<Self, String> {
        match u32::try_from(value) {
            Ok(v) if (1..=RUNTIME_MAX).contains(&v) => Ok(Self(v)),
            _ => Err(format!(
                "is {value}; it must be between 1 and {RUNTIME_MAX} seconds"
            )),
        }
    }
}

impl From<Runtime> for u64 {
    fn from(v: Runtime) -> u64 {
        u64::from(v.0)
    }
}

impl Runtime {
    /// The budget in seconds.
    pub fn seconds(self) -> u32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objective_limits() {
        assert!(Objective::try_from("x".repeat(OBJECTIVE_MAX)).is_ok());
        assert_eq!(
            Objective::try_from("x".repeat(OBJECTIVE_MAX + 1)).unwrap_err(),
            "is 50001 characters; the limit is 50000"
        );
        assert_eq!(
            Objective::try_from(" \n\t".to_string()).unwrap_err(),
            "must not be blank"
        );
        // characters, not bytes
        assert!(Objective::try_from("é".repeat(OBJECTIVE_MAX)).is_ok());
    }

    #[test]
    fn task_id_charset() {
        assert!(TaskId::try_from("T-1.2:a_b".to_string()).is_ok());
        assert_eq!(
            TaskId::try_from("a b".to_string()).unwrap_err(),
            "contains ' '; only letters, digits and . _ : - are allowed"
        );
        assert!(TaskId::try_from("x".repeat(129)).is_err());
    }

    #[test]
    fn runtime_range() {
        assert!(Runtime::try_from(0).is_err());
        assert_eq!(Runtime::try_from(1).unwrap().seconds(), 1);
        assert_eq!(Runtime::try_from(86_400).unwrap().seconds(), 86_400);
        assert!(Runtime::try_from(86_401).is_err());
        assert!(Runtime::try_from(u64::MAX).is_err());
    }
}

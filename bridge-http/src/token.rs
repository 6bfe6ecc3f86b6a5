//! The bearer token: loaded from a file or the environment, compared in constant time.

use std::path::Path;

use crate::error::BridgeError;

/// Shortest token accepted: anything shorter is guessable.
const MIN_LEN: usize = 16;
/// Largest token file read (a token is a line of at most a few hundred characters).
const TOKEN_FILE_LIMIT: usize = 64 * 1024;

/// A bearer token. Its `Debug` never shows the value.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

impl Token {
    /// A token from its text (surrounding whitespace, e.g. a file's newline, is dropped).
    ///
    /// # Errors
    /// [`BridgeError::BadToken`] when it is shorter than 16 characters or holds whitespace or
    /// control characters (it travels in an HTTP header).
    pub fn new(text: &str) -> Result<Self, BridgeError> {
        let t = text.trim();
        if t.len() < MIN_LEN {
            let n = t.chars().count();
            let noun = if n == 1 { "character" } else { "characters" };
            return Err(BridgeError::BadToken(format!(
                "it has {n} {noun}; use at least {MIN_LEN} (e.g. `openssl rand -hex 32`)"
            )));
        }
        if t.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(BridgeError::BadToken(
                "it holds whitespace or control characters".into(),
            ));
        }
        Ok(Self(t.to_owned()))
    }

    /// The token in `path`.
    ///
    /// # Errors
    /// [`BridgeError::TokenFile`] when it cannot be read, else as [`Token::new`].
    pub fn from_file(path: &Path) -> Result<Self, BridgeError> {
        // bounded: a token file that is `/dev/zero` or a FIFO nobody writes must not hang or grow
        let bytes = droid_exec::input::read_input(
            droid_exec::input::Input::Path(path),
            &format!("the token file {}", path.display()),
            TOKEN_FILE_LIMIT,
            "a token file holds one token",
        )
        .map_err(|e| BridgeError::TokenFile {
            path: path.to_path_buf(),
            reason: match e {
                droid_exec::EngineError::Input { source, .. } => source,
                other => std::io::Error::other(other.to_string()),
            },
        })?;
        let text = String::from_utf8(bytes)
            .map_err(|_| BridgeError::BadToken("the token file is not UTF-8 text".into()))?;
        Self::new(&text)
    }

    /// The value, for a client's `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this token. The time taken depends only on the lengths, never on
    /// where the first difference is.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let want = self.0.as_bytes();
        let mut diff = u8::from(want.len() != presented.len());
        for (i, w) in want.iter().enumerate() {
            let p = presented.get(i).copied().unwrap_or(0);
            diff |= w ^ p;
        }
        std::hint::black_box(diff) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_exactly() {
        let t = Token::new("  0123456789abcdef\n").unwrap();
        assert!(t.matches(b"0123456789abcdef"));
        assert!(!t.matches(b"0123456789abcdeF"));
        assert!(!t.matches(b"0123456789abcde"));
        assert!(!t.matches(b"0123456789abcdef0"));
        assert!(!t.matches(b""));
        assert_eq!(format!("{t:?}"), "Token(…)");
    }

    #[test]
    fn refuses_weak_tokens() {
        assert!(Token::new("short").is_err());
        assert!(Token::new("0123456789 abcdef").is_err());
        // the count in the message agrees with its noun
        for (token, says) in [("x", "it has 1 character;"), ("xy", "it has 2 characters;")] {
            let e = Token::new(token).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
    }
}

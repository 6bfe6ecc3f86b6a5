//! Masking text that reaches a client in pieces: the model's answer and reasoning, one token
//! delta at a time. The [`Redactor`] masks a whole text; a secret split across two deltas is in
//! neither, so each stream keeps back the end of what it was given that could be the start of a
//! secret, and masks it with what comes next.
//!
//! What is kept back (the rest is masked and sent at once):
//! - the last run of non-whitespace characters (a token after `fk-`, `sk-`, `ghp_`, `AKIA`…, a
//!   URL's user information, a value after `FACTORY_API_KEY=`, all of which stop at whitespace
//!   or earlier), and before it a prefix that ends in whitespace (`Bearer `,
//!   `FACTORY_API_KEY: `), or a part of one;
//! - an end that is the start of one of the values hidden wherever they appear (a credential
//!   passed to droid, which may hold spaces), and a whole such value that would be cut.
//!
//! A model streaming words with their spaces (`"Done: "`, `"file "`) is sent word for word; one
//! streaming tokens that start with their space (`" world"`) is sent a token later. What is kept
//! is bounded ([`MAX_KEPT`]): a run of non-whitespace longer than that is sent masked, and if
//! its masking reached its end, the token characters that follow it are left out.

use crate::run::redact::{MASK, Redactor, SECRET_PREFIXES};

/// Most bytes kept back (a run of non-whitespace longer than this is sent, masked).
pub const MAX_KEPT: usize = 64 * 1024;

/// One stream of text masked as it goes.
#[derive(Debug, Clone)]
pub struct StreamMask {
    redact: Redactor,
    kept: String,
    /// The last text sent ended inside a masked token: leave out the token characters that
    /// continue it.
    in_masked_token: bool,
}

/// The characters of a token (RFC 6750's b64token, which the redactor's token rules mask).
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'=' | b'+' | b'/')
}

impl StreamMask {
    /// A stream masked by `redact`.
    pub fn new(redact: Redactor) -> Self {
        Self {
            redact,
            kept: String::new(),
            in_masked_token: false,
        }
    }

    /// The text to send now for `delta` (possibly empty: everything was kept back).
    pub fn push(&mut self, delta: &str) -> String {
        self.kept.push_str(delta);
        if self.in_masked_token {
            let skip = self.kept.bytes().take_while(|b| is_token(*b)).count();
            self.kept.drain(..skip);
            if self.kept.is_empty() {
                return String::new();
            }
            self.in_masked_token = false;
        }
        let mut cut = self.cut(true);
        let forced = self.kept.len() - cut > MAX_KEPT;
        if forced {
            cut = self.cut(false);
        }
        let rest = self.kept.split_off(cut);
        let now = std::mem::replace(&mut self.kept, rest);
        let masked = self.redact.apply(&now);
        if forced && now.bytes().last().is_some_and(is_token) && masked.ends_with(MASK) {
            self.in_masked_token = true;
        }
        masked
    }

    /// The rest, masked: the stream ends (or another message starts).
    pub fn flush(&mut self) -> String {
        self.in_masked_token = false;
        let now = std::mem::take(&mut self.kept);
        self.redact.apply(&now)
    }

    /// Where what is kept back starts: after the part that no secret can reach past. `words`:
    /// keep back the last word and the prefix before it too, else only what the hidden values
    /// need.
    fn cut(&self, words: bool) -> usize {
        let text = self.kept.as_str();
        let bytes = text.as_bytes();
        let mut cut = bytes.len();
        if words {
            cut = bytes
                .iter()
                .rposition(u8::is_ascii_whitespace)
                .map_or(0, |i| i + 1);
            // a prefix ending in whitespace right before it (`Bearer `), or part of one
            let before = &bytes[..cut];
            for (prefix, _) in SECRET_PREFIXES {
                let p = prefix.as_bytes();
                for k in 1..=p.len() {
                    if p[k - 1].is_ascii_whitespace()
                        && before.len() >= k
                        && before[before.len() - k..].eq_ignore_ascii_case(&p[..k])
                    {
                        cut = cut.min(before.len() - k);
                    }
                }
            }
        }
        for value in self.redact.values() {
            let v = value.as_bytes();
            // an end that starts the value
            for k in (1..v.len().min(bytes.len() + 1)).rev() {
                if bytes[bytes.len() - k..] == v[..k] {
                    cut = cut.min(bytes.len() - k);
                    break;
                }
            }
        }
        // a whole hidden value the cut would split: kept back from its start (which may move
        // the cut before another one)
        loop {
            let mut moved = false;
            for value in self.redact.values() {
                for (start, _) in text.match_indices(value.as_str()) {
                    if start < cut && cut < start + value.len() {
                        cut = start;
                        moved = true;
                    }
                }
            }
            if !moved {
                return cut;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn redactor() -> Redactor {
        Redactor::from_env([
            ("DEPLOY_TOKEN", "alpha bravo charlie delta"),
            ("MY_SECRET", "s3cr3t-value-42"),
        ])
    }

    /// `pieces` through a stream: what is sent, piece by piece, and the flush.
    fn stream(r: &Redactor, pieces: &[&str]) -> Vec<String> {
        let mut m = StreamMask::new(r.clone());
        let mut out: Vec<String> = pieces.iter().map(|p| m.push(p)).collect();
        out.push(m.flush());
        out
    }

    const SECRETS: &[&str] = &[
        "alpha bravo charlie delta",
        "s3cr3t-value-42",
        "0123456789abcdefghij",
        "abcdefghijklmnop",
        "ghp_0123456789abcdefghijABCDEF",
        "pa55w0rd",
        "IOSFODNN7EXAMPLE",
        "zz99",
    ];

    /// Every secret the redactor masks in a whole text stays masked however the text is cut
    /// into two or three pieces, and what is sent is what masking the whole sends.
    #[test]
    fn a_secret_cut_anywhere_never_reaches_the_client() {
        let r = redactor();
        let texts = [
            "the token is alpha bravo charlie delta, keep it",
            "echo s3cr3t-value-42 done",
            "key=sk-proj-0123456789abcdefghij and more",
            "Authorization: Bearer abcdefghijklmnop\n",
            "gh ghp_0123456789abcdefghijABCDEF end",
            "proxy http://alice:pa55w0rd@proxy.example:3128/ ok",
            "aws AKIAIOSFODNN7EXAMPLE.",
            "{\"FACTORY_API_KEY\": \"zz99\"}",
            "FACTORY_API_KEY: zz99 x",
        ];
        for text in texts {
            let whole = r.apply(text);
            let n = text.len();
            for i in (0..=n).filter(|i| text.is_char_boundary(*i)) {
                for j in (i..=n).filter(|j| text.is_char_boundary(*j)) {
                    let sent = stream(&r, &[&text[..i], &text[i..j], &text[j..]]);
                    let joined: String = sent.concat();
                    assert_eq!(joined, whole, "{text:?} cut at {i} and {j}: {sent:?}");
                    for secret in SECRETS {
                        for piece in &sent {
                            assert!(!piece.contains(secret), "{secret:?} in {sent:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn words_with_their_spaces_go_out_word_for_word() {
        let r = redactor();
        assert_eq!(
            stream(&r, &["Done: ", "GREETING.md ", "says ", "hello."]),
            vec!["Done: ", "GREETING.md ", "says ", "", "hello."]
        );
        // a token that starts with its space goes out a token later
        assert_eq!(
            stream(&r, &["Hel", "lo", " world", "!"]),
            vec!["", "", "Hello ", "", "world!"]
        );
        // the start of a hidden value is kept until it is known not to be one
        assert_eq!(
            stream(&r, &["say alpha ", "bravo ", "zulu "]),
            vec!["say ", "", "alpha bravo zulu ", ""]
        );
        assert_eq!(
            stream(&r, &["a Bearer ", "abcdefghijk ", "b"]),
            vec!["a ", "Bearer [REDACTED] ", "", "b"]
        );
    }

    #[test]
    fn what_is_kept_back_is_bounded() {
        let r = redactor();
        let mut m = StreamMask::new(r);
        let long = "x".repeat(MAX_KEPT);
        assert_eq!(m.push(&long), "");
        assert_eq!(m.push("xx").len(), MAX_KEPT + 2);
        // a token masked to its end: what continues it is left out
        let mut m = StreamMask::new(redactor());
        let token = format!("fk-{}", "a".repeat(MAX_KEPT - 3));
        assert_eq!(m.push(&token), "");
        assert_eq!(m.push("bbbb"), "fk-[REDACTED]");
        assert_eq!(m.push("cccc"), "");
        assert_eq!(m.push("dd tail"), " ");
        assert_eq!(m.flush(), "tail");
    }
}

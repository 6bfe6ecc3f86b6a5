//! A failed turn in the chat. The prompt is still answered with its JSON-RPC error, and before
//! it the cause goes out as an `agent_message_chunk`, in our words: some clients never show an
//! error response's message (issue 33: a terminal client showed only "Failed to send prompt"
//! and advice to reinstall the agent), and droid's own ACP mode sends the cause as message text
//! too.

/// Why a turn failed.
#[derive(Debug, Clone, Copy)]
pub enum Failure<'a> {
    /// droid ended the turn for this reason (`agent_turn_completed.reason`), with the errors it
    /// reported.
    Droid {
        /// droid's reason (`model_request_rejected`, `model_provider_unavailable`, …).
        reason: &'a str,
        /// droid's error messages (the model's answer among them).
        errors: &'a [String],
    },
    /// droid's process ended during the turn (the end of what it wrote on stderr).
    Exited {
        /// droid's last stderr lines.
        tail: &'a str,
    },
    /// The turn ran past `default_timeout`.
    TimedOut {
        /// The setting, in seconds.
        secs: u64,
    },
}

/// The message text saying why the turn failed and what to do.
pub fn message(failure: Failure<'_>) -> String {
    match failure {
        Failure::Droid { reason, errors } => {
            let what = match reason {
                "model_request_rejected" => "the model refused droid's request".to_owned(),
                "model_provider_unavailable" => {
                    "the model's server could not be reached, or kept failing after droid's retries"
                        .to_owned()
                }
                "model_authentication_failed" => {
                    "the model's server did not accept droid's credentials".to_owned()
                }
                "no_approver_available" => "droid needed a permission nobody could give".to_owned(),
                "" => "droid ended it without saying why".to_owned(),
                other => format!("droid ended it ({other})"),
            };
            // droid's first error (the model's answer) in the line, its explanations after
            let (said, more) = match errors.split_first() {
                Some((first, rest)) => (
                    format!(" ({})", first.trim()),
                    rest.iter()
                        .map(|e| format!("\n\n{}", e.trim()))
                        .collect::<String>(),
                ),
                None => (String::new(), String::new()),
            };
            let next = if reason == "model_authentication_failed" {
                "Check the model's API key (customModels in ~/.factory/settings.json) or \
                 FACTORY_API_KEY, then send the prompt again."
            } else {
                "Send the prompt again, or choose another model (/model)."
            };
            format!("This turn failed: {what}{said}.{more}\n\n{next}")
        }
        Failure::Exited { tail } => {
            let tail = tail.trim();
            let said = if tail.is_empty() {
                String::new()
            } else {
                format!(" (it said: {tail})")
            };
            format!(
                "This turn failed: droid stopped during it{said}. The next prompt starts droid \
                 again on this conversation."
            )
        }
        Failure::TimedOut { secs } => format!(
            "This turn ran longer than {secs} s (the default_timeout setting) and was stopped. \
             Send the prompt again, or raise default_timeout."
        ),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn a_failure_says_what_happened_and_what_to_do() {
        let errors = vec!["400 Bad request: invalid parameter".to_owned()];
        assert_eq!(
            message(Failure::Droid {
                reason: "model_request_rejected",
                errors: &errors
            }),
            "This turn failed: the model refused droid's request (400 Bad request: invalid \
             parameter).\n\nSend the prompt again, or choose another model (/model)."
        );
        assert_eq!(
            message(Failure::Droid {
                reason: "something_new",
                errors: &[]
            }),
            "This turn failed: droid ended it (something_new).\n\nSend the prompt again, or \
             choose another model (/model)."
        );
        assert!(message(Failure::Exited { tail: "boom\n" }).contains("(it said: boom)"));
        assert!(message(Failure::TimedOut { secs: 3 }).contains("longer than 3 s"));
    }
}

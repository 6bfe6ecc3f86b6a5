//! A provider as a command-line argument (`ask`, `pend`, `cancel`, `ping`): its parser and its
//! help, both from the contract's table of providers.

use droid_contract::ProviderId;

/// A provider argument's help: `what`, the providers of the contract's table, then `tail`.
pub(crate) fn provider_help(what: &str, tail: &str) -> String {
    format!("{what}: {}{tail}", ProviderId::names(", "))
}

/// A provider's wire name, or an error listing them.
pub(crate) fn parse_provider(s: &str) -> Result<ProviderId, String> {
    ProviderId::parse(s)
        .ok_or_else(|| format!("unknown provider; one of {}", ProviderId::choices()))
}

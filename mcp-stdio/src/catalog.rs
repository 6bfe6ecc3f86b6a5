//! Which tools a server offers ([`Catalog`]): its toolsets (setting `toolsets`, or `mcp
//! --toolsets`) and the providers it delegates to (setting `providers`).

use droid_contract::ProviderId;
use droid_exec::toolset::Toolsets;

/// The tools a server offers: its toolsets (setting `toolsets`, or `mcp --toolsets`) and the
/// providers it delegates to (setting `providers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// The toolsets that are on.
    pub toolsets: Toolsets,
    /// The providers of the delegation tools.
    pub providers: Vec<ProviderId>,
}

impl Default for Catalog {
    /// The defaults: toolsets `droid` and `delegate`, all five providers.
    fn default() -> Self {
        Self {
            toolsets: Toolsets::default(),
            providers: ProviderId::ALL.to_vec(),
        }
    }
}

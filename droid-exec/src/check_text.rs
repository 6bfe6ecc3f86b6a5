//! Readiness checks ([`Check`]) as text: the one renderer of `doctor`, `ping`, and the MCP tools
//! `droid_ping`, `ping` and `ping_<p>`. Two layouts, each kept by its readers: columns for a
//! person at a terminal, one line per check for a model reading a tool's answer (clients quote
//! those lines back: `OK auth: FACTORY_API_KEY is set`).

use crate::health::Check;

/// How checks are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `OK   name          detail`, the fix indented on the line below (`doctor`, `ping`).
    Columns,
    /// `OK name: detail (fix: …)`, one line per check (the MCP tools).
    Lines,
}

/// `checks` as text in `layout`.
pub fn render(checks: &[Check], layout: Layout) -> String {
    checks
        .iter()
        .map(|c| match layout {
            Layout::Columns => column(c),
            Layout::Lines => line(c),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn column(c: &Check) -> String {
    let tag = format!("{:<4}", c.level.tag());
    // a detail of several lines (a TOML error quotes the line) stays under its check
    let detail = c.detail.trim_end().replace('\n', &format!("\n{:19}", ""));
    if c.fix.is_empty() {
        format!("{tag} {:<13} {detail}", c.name)
    } else {
        format!(
            "{tag} {:<13} {detail}\n     {:<13} fix: {}",
            c.name, "", c.fix
        )
    }
}

fn line(c: &Check) -> String {
    let lvl = c.level.tag();
    if c.fix.is_empty() {
        format!("{lvl} {}: {}", c.name, c.detail)
    } else {
        format!("{lvl} {}: {} (fix: {})", c.name, c.detail, c.fix)
    }
}

/// `checks` as a pretty JSON array of `{"check", "level", "detail", "fix"}` (`doctor --json`,
/// `ping --json`; the MCP tools put the same values in their structured content).
pub fn json(checks: &[Check]) -> String {
    serde_json::to_string_pretty(checks).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::health::Level;

    #[test]
    fn both_layouts_and_json() {
        let checks = [
            Check {
                name: "auth",
                level: Level::Ok,
                detail: "FACTORY_API_KEY is set".into(),
                fix: String::new(),
            },
            Check {
                name: "gemini",
                level: Level::Warn,
                detail: "not found".into(),
                fix: "install it".into(),
            },
        ];
        assert_eq!(
            render(&checks, Layout::Lines),
            "OK auth: FACTORY_API_KEY is set\nWARN gemini: not found (fix: install it)"
        );
        assert_eq!(
            render(&checks, Layout::Columns),
            format!(
                "OK   auth          FACTORY_API_KEY is set\nWARN gemini        not found\n{:19}fix: install it",
                ""
            )
        );
        let v: serde_json::Value = serde_json::from_str(&json(&checks)).unwrap_or_default();
        assert_eq!(
            v,
            serde_json::json!([
                {"check": "auth", "level": "ok", "detail": "FACTORY_API_KEY is set", "fix": ""},
                {"check": "gemini", "level": "warn", "detail": "not found", "fix": "install it"}
            ])
        );
    }
}

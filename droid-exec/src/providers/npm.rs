//! Versions of npm-installed agent CLIs, read from the `package.json` of the package a program
//! belongs to (microseconds) instead of starting the program (`--version` is a full start of a
//! Node or Bun program: 50 ms to several seconds).

use std::io::Read as _;
use std::path::Path;

use serde_json::Value;

/// Largest `package.json` read.
const MANIFEST_MAX: u64 = 1 << 20;

/// The version in the `package.json` of the npm package named `package` (or a platform build
/// whose name starts with it, `@factory/cli-linux-x64`) that `program` (symlinks resolved) is a
/// file of, looking at most three directories up (`<package>/bin/x`,
/// `<package>/bundle/x.js`, `<package>/vendor/<triple>/bin/x`).
pub fn package_version(program: &Path, package: &str) -> Option<String> {
    let real = std::fs::canonicalize(program).ok()?;
    let mut dir = real.parent();
    for _ in 0..4 {
        let d = dir?;
        if let Some(v) = manifest_version(&d.join("package.json"), package) {
            return Some(v);
        }
        dir = d.parent();
    }
    None
}

fn manifest_version(path: &Path, package: &str) -> Option<String> {
    match manifest(path)? {
        (name, version) if name.starts_with(package) => version,
        _ => None,
    }
}

/// The `name` of the `package.json` at `path`, and its `version` when it has one (read up to
/// [`MANIFEST_MAX`] bytes).
pub(crate) fn manifest(path: &Path) -> Option<(String, Option<String>)> {
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(MANIFEST_MAX).read_to_string(&mut text).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    let name = v.get("name")?.as_str()?.to_owned();
    let version = v
        .get("version")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned);
    Some((name, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_owning_package_only() {
        let dir = std::env::temp_dir().join(format!("npm-version-{}", std::process::id()));
        let bin = dir.join("pkg/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(
            dir.join("pkg/package.json"),
            r#"{"name":"@openai/codex","version":"0.169.0"}"#,
        )
        .unwrap();
        std::fs::write(bin.join("codex.js"), "").unwrap();
        assert_eq!(
            package_version(&bin.join("codex.js"), "@openai/codex").as_deref(),
            Some("0.169.0")
        );
        assert_eq!(package_version(&bin.join("codex.js"), "@factory/cli"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

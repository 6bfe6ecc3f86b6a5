//! Where `npm install -g` puts packages: npm's global prefixes, found from the environment alone
//! (running `npm prefix -g` would start Node for each front-end). A package installed globally
//! lives in `<prefix>/lib/node_modules/<name>`, and the programs it declares are linked into
//! `<prefix>/bin`.
//!
//! The candidates, in this order, without duplicates and at most [`MAX_PREFIXES`] of them:
//! - `npm_config_prefix` / `NPM_CONFIG_PREFIX` (npm reads its settings from the environment in any
//!   case);
//! - `prefix` in the user's npm configuration (`$NPM_CONFIG_USERCONFIG`, else `$HOME/.npmrc`,
//!   read up to [`NPMRC_MAX`] bytes), where `npm config set prefix ~/.npm-global` writes it;
//! - the parent of every absolute `PATH` directory named `bin`: npm's default prefix is the
//!   directory above the `node` it runs with (`/usr` for `/usr/bin/node`, nvm's version
//!   directory), and the global bin directory must be on `PATH` for any npm-installed program
//!   to work.
//!
//! Only paths come from here: whoever looks inside a prefix decides what it trusts there
//! (`crate::providers::droid::install`).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Prefixes looked at, at most.
pub(crate) const MAX_PREFIXES: usize = 32;
/// Bytes of the user's npm configuration read, at most.
pub(crate) const NPMRC_MAX: u64 = 64 * 1024;

/// npm's global prefixes for a process whose environment is `env` (see the module docs).
pub(crate) fn global_prefixes(env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let var = |name: &str| env.get(name).map(String::as_str).filter(|v| !v.is_empty());
    let mut out: Vec<PathBuf> = Vec::new();
    let mut add = |p: PathBuf| {
        if p.is_absolute() && out.len() < MAX_PREFIXES && !out.contains(&p) {
            out.push(p);
        }
    };
    if let Some(p) = var("npm_config_prefix").or_else(|| var("NPM_CONFIG_PREFIX")) {
        add(expand(p, env));
    }
    let rc = var("NPM_CONFIG_USERCONFIG")
        .or_else(|| var("npm_config_userconfig"))
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| Path::new(h).join(".npmrc")));
    if let Some(p) = rc
        .and_then(|rc| read_bounded(&rc))
        .and_then(|t| npmrc_prefix(&t))
    {
        add(expand(&p, env));
    }
    if let Some(path) = var("PATH") {
        for dir in std::env::split_paths(path) {
            if dir.is_absolute()
                && dir.file_name().is_some_and(|n| n == "bin")
                && let Some(parent) = dir.parent()
            {
                add(parent.to_path_buf());
            }
        }
    }
    out
}

/// The file's text, if it is a regular file of at most [`NPMRC_MAX`] bytes (a FIFO is not
/// waited on).
fn read_bounded(path: &Path) -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(NPMRC_MAX).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The value of `prefix` in an npmrc text (ini: `key = value`, comments start with `;` or `#`,
/// the last setting wins, a value may be quoted).
fn npmrc_prefix(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            if line.starts_with(';') || line.starts_with('#') {
                return None;
            }
            let (key, value) = line.split_once('=')?;
            if !key.trim().eq_ignore_ascii_case("prefix") {
                return None;
            }
            let v = value.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v);
            (!v.is_empty()).then(|| v.to_owned())
        })
        .next_back()
}

/// npm's expansions of a path setting: `${NAME}` from the environment, a leading `~/` as the
/// home directory.
fn expand(value: &str, env: &BTreeMap<String, String>) -> PathBuf {
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        match after.find('}') {
            Some(end) => {
                out.push_str(env.get(&after[..end]).map_or("", String::as_str));
                rest = &after[end + 1..];
            }
            None => {
                out.push_str(&rest[at..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    match (out.strip_prefix("~/"), env.get("HOME")) {
        (Some(tail), Some(home)) => Path::new(home).join(tail),
        _ => PathBuf::from(out),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn prefixes_come_from_the_variable_the_npmrc_and_path_in_that_order() {
        let home = std::env::temp_dir().join(format!("npm-prefix-{}", std::process::id()));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join(".npmrc"),
            "; a comment\nregistry=https://example.invalid/\nprefix = \"~/.npm-global\"\n",
        )
        .unwrap();
        let h = home.display().to_string();
        let e = env(&[
            ("HOME", &h),
            ("NPM_CONFIG_PREFIX", "${HOME}/from-env"),
            (
                "PATH",
                "/usr/local/sbin:/usr/bin:relative/bin:/opt/node/bin:/usr/bin:/bin",
            ),
        ]);
        assert_eq!(
            global_prefixes(&e),
            [
                home.join("from-env"),
                home.join(".npm-global"),
                PathBuf::from("/usr"),
                PathBuf::from("/opt/node"),
                PathBuf::from("/"),
            ]
        );
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn an_npmrc_prefix_is_read_as_npm_reads_it() {
        assert_eq!(
            npmrc_prefix("prefix=/a\nPREFIX = '/b'\n").as_deref(),
            Some("/b")
        );
        assert_eq!(npmrc_prefix("# prefix=/a\n;prefix=/b\n"), None);
        assert_eq!(npmrc_prefix("prefix=\n"), None);
        let e = env(&[("HOME", "/home/u"), ("X", "x")]);
        assert_eq!(
            expand("~/g/${X}/${NOPE}y", &e),
            PathBuf::from("/home/u/g/x/y")
        );
        assert_eq!(expand("/p/${open", &e), PathBuf::from("/p/${open"));
    }

    #[test]
    fn an_unreadable_or_special_npmrc_is_no_prefix() {
        let e = env(&[("NPM_CONFIG_USERCONFIG", "/proc/self"), ("PATH", "")]);
        assert_eq!(global_prefixes(&e), Vec::<PathBuf>::new());
    }
}

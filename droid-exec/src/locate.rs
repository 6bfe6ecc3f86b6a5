//! Finding the agent programs. droid: the config's `droid_bin`, then `DROID_CLI_CMD`, then `PATH`,
//! then its platform package under npm's global prefixes; the other providers: `<provider>_bin`
//! (config or `DROID_EXECUTOR_<PROVIDER>_BIN`), then `PATH`; and nowhere else (no guessing in
//! home directories: a test or a user that wants a particular binary names it).
//!
//! droid's pinned install line installs its platform package, which npm links nowhere onto `PATH`
//! ([`crate::providers::droid::install`]), so droid is also looked for where npm puts it. And a
//! `droid` on `PATH` that is the `@factory/cli` launcher (a Node script) is replaced by the
//! platform binary it would run, when that is installed where the launcher looks first: the same
//! program, without a Node start, and with its own version in its `package.json`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::process::spawn::resolve_program;
use crate::providers::droid::install;

/// Where droid was found, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The program, when found.
    pub program: Option<PathBuf>,
    /// Where it came from (`config droid_bin`, `DROID_CLI_CMD`, `PATH`), or what was tried.
    pub source: String,
    /// Things worth telling the user (ignored extra words in `DROID_CLI_CMD`, a configured path
    /// that does not exist).
    pub warnings: Vec<String>,
}

/// Locate droid. `cli_cmd` is seed 000's `DROID_CLI_CMD` (docs/architecture.md#origin): its first
/// word is the program; extra
/// words (the origin's `exec --output-format json --auto high`) are ignored with a warning, since
/// the engine sets its own flags. `npm_prefixes` gives npm's global prefixes, asked only when
/// droid is not on `PATH`.
pub fn locate_droid(
    configured: Option<&Path>,
    cli_cmd: Option<&str>,
    path_var: Option<&OsStr>,
    npm_prefixes: impl FnOnce() -> Vec<PathBuf>,
) -> Located {
    let mut warnings = Vec::new();
    if let Some(p) = configured {
        return match resolve_program(p, path_var) {
            Some(found) => Located {
                program: Some(found),
                source: "config droid_bin".into(),
                warnings,
            },
            None => Located {
                program: None,
                source: format!("config droid_bin {} ({})", p.display(), why_not(p)),
                warnings,
            },
        };
    }
    if let Some(cmd) = cli_cmd.map(str::trim).filter(|c| !c.is_empty()) {
        let mut words = cmd.split_whitespace();
        let program = words.next().unwrap_or(cmd);
        let rest: Vec<&str> = words.collect();
        if !rest.is_empty() {
            warnings.push(format!(
                "DROID_CLI_CMD: ignoring {:?}; droid-executor sets droid's flags itself",
                rest.join(" ")
            ));
        }
        return match resolve_program(Path::new(program), path_var) {
            Some(found) => Located {
                program: Some(found),
                source: "DROID_CLI_CMD".into(),
                warnings,
            },
            None => Located {
                program: None,
                source: format!("DROID_CLI_CMD {program} ({})", why_not(Path::new(program))),
                warnings,
            },
        };
    }
    if let Some(found) = resolve_program(Path::new("droid"), path_var) {
        return match install::launcher(&found).and_then(|l| l.binary) {
            Some(binary) => Located {
                program: Some(binary),
                source: format!(
                    "PATH, through the {} launcher {}",
                    install::LAUNCHER,
                    found.display()
                ),
                warnings,
            },
            None => Located {
                program: Some(found),
                source: "PATH".into(),
                warnings,
            },
        };
    }
    for prefix in npm_prefixes() {
        if let Some(binary) = install::in_prefix(&prefix) {
            return Located {
                program: Some(binary),
                source: format!("npm global prefix {}", prefix.display()),
                warnings,
            };
        }
    }
    Located {
        program: None,
        source: format!(
            "droid on PATH, or {} in npm's global packages (not found)",
            install::platform_package()
        ),
        warnings,
    }
}

/// Locate the program of another provider: `configured` (setting `<name>_bin`), then `name` on
/// `PATH`.
pub fn locate_agent(name: &str, configured: Option<&Path>, path_var: Option<&OsStr>) -> Located {
    let found = |p: &Path, source: String| match resolve_program(p, path_var) {
        Some(program) => Located {
            program: Some(program),
            source,
            warnings: Vec::new(),
        },
        None => Located {
            program: None,
            source: format!("{source} {} ({})", p.display(), why_not(p)),
            warnings: Vec::new(),
        },
    };
    if let Some(p) = configured {
        return found(p, format!("config {name}_bin"));
    }
    match resolve_program(Path::new(name), path_var) {
        Some(program) => Located {
            program: Some(program),
            source: "PATH".into(),
            warnings: Vec::new(),
        },
        None => Located {
            program: None,
            source: format!("{name} on PATH (not found)"),
            warnings: Vec::new(),
        },
    }
}

/// Why `program` cannot be run: a path that exists gets its precise reason (a directory, no
/// execute permission); anything else was not found.
fn why_not(program: &Path) -> &'static str {
    use std::os::unix::fs::PermissionsExt as _;
    let is_path = program.components().count() > 1 || program.is_absolute();
    match std::fs::metadata(program) {
        Ok(m) if is_path && m.is_dir() => "a directory, not a program",
        Ok(m) if is_path && m.permissions().mode() & 0o111 == 0 => "not executable: chmod +x it",
        _ => "not found",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_is_config_then_env_then_path() {
        let sh = resolve_program(Path::new("sh"), Some(OsStr::new("/bin:/usr/bin"))).unwrap();
        let path = OsStr::new("/bin:/usr/bin");
        let l = locate_droid(Some(&sh), Some("nothing-here"), Some(path), Vec::new);
        assert_eq!(l.source, "config droid_bin");
        let l = locate_droid(
            None,
            Some("sh exec --output-format json --auto high"),
            Some(path),
            Vec::new,
        );
        assert_eq!(l.program.as_deref(), Some(sh.as_path()));
        assert_eq!(l.source, "DROID_CLI_CMD");
        assert_eq!(
            l.warnings,
            [
                "DROID_CLI_CMD: ignoring \"exec --output-format json --auto high\"; droid-executor sets droid's flags itself"
            ]
        );
        let l = locate_droid(None, None, Some(OsStr::new("/nonexistent-dir")), Vec::new);
        assert_eq!(l.program, None);
        assert_eq!(
            l.source,
            format!(
                "droid on PATH, or {} in npm's global packages (not found)",
                install::platform_package()
            )
        );
        let l = locate_droid(
            Some(Path::new("/no/such/droid")),
            None,
            Some(path),
            Vec::new,
        );
        assert_eq!(l.program, None);
        assert_eq!(l.source, "config droid_bin /no/such/droid (not found)");
        let l = locate_droid(None, Some("/"), Some(path), Vec::new);
        assert_eq!(l.source, "DROID_CLI_CMD / (a directory, not a program)");
        let l = locate_droid(None, Some("Cargo.toml"), Some(path), Vec::new);
        assert_eq!(l.source, "DROID_CLI_CMD Cargo.toml (not found)");
        let l = locate_droid(None, Some("./Cargo.toml"), Some(path), Vec::new);
        assert_eq!(
            l.source,
            "DROID_CLI_CMD ./Cargo.toml (not executable: chmod +x it)"
        );
    }

    #[test]
    fn after_path_come_npm_prefixes_and_a_launcher_on_path_is_run_as_its_binary() {
        use std::os::unix::fs::PermissionsExt as _;
        let program = |p: &Path, text: &str| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        let dir = crate::real_path::canonical(&std::env::temp_dir())
            .unwrap()
            .join(format!("locate-npm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let prefix = dir.join("prefix");
        let plat = install::platform_package();
        let bin = prefix.join(format!("lib/node_modules/{plat}/bin/droid"));
        program(&bin, "\x7fELF");
        let none = OsStr::new("/nonexistent-dir");
        let l = locate_droid(None, None, Some(none), || {
            vec![dir.join("empty"), prefix.clone()]
        });
        assert_eq!(l.program.as_deref(), Some(bin.as_path()));
        assert_eq!(l.source, format!("npm global prefix {}", prefix.display()));

        // the launcher linked onto PATH, with its platform package beside it
        let launcher = prefix.join("lib/node_modules/@factory/cli");
        program(&launcher.join("bin/droid"), "#!/usr/bin/env node\n");
        std::fs::write(
            launcher.join("package.json"),
            r#"{"name":"@factory/cli","version":"0.225.1"}"#,
        )
        .unwrap();
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        std::os::unix::fs::symlink(
            "../lib/node_modules/@factory/cli/bin/droid",
            prefix.join("bin/droid"),
        )
        .unwrap();
        let path = prefix.join("bin").into_os_string();
        let l = locate_droid(None, None, Some(&path), || {
            unreachable!("npm's prefixes are looked at only when PATH has no droid")
        });
        assert_eq!(l.program.as_deref(), Some(bin.as_path()));
        assert_eq!(
            l.source,
            format!(
                "PATH, through the @factory/cli launcher {}",
                prefix.join("bin/droid").display()
            )
        );
        // without its platform package, the launcher is what PATH has
        std::fs::remove_dir_all(prefix.join(format!("lib/node_modules/{plat}"))).unwrap();
        let l = locate_droid(None, None, Some(&path), Vec::new);
        assert_eq!(l.program, Some(prefix.join("bin/droid")));
        assert_eq!(l.source, "PATH");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

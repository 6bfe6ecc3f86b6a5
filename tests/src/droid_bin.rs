//! Where the binaries the suites run are.
//!
//! The real droid 0.225.2 is installed by `cargo xtask fetch-droid` under `target/droid`; a test
//! that needs it panics with the install command when it is missing (tests never skip). This
//! crate's own binaries are known to Cargo only while it compiles the test binary
//! (`CARGO_BIN_EXE_<name>` is not set for the library), so their paths come from macros that
//! expand inside the test: [`fake_droid_bin!`](crate::fake_droid_bin!) and
//! [`scripted_model_bin!`](crate::scripted_model_bin!).

use std::path::PathBuf;

/// The droid version the suites and fixtures are written against.
pub const DROID_VERSION: &str = "0.225.2";

/// Overrides where the real droid is (a path to the executable).
pub const DROID_ENV: &str = "DROID_EXECUTOR_TEST_DROID";

/// The workspace root (the parent of this crate's folder).
pub fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map_or_else(|| manifest_dir.clone(), PathBuf::from)
}

/// The real droid 0.225.2: `$DROID_EXECUTOR_TEST_DROID` if set, else
/// `<workspace>/target/droid/0.225.2/package/bin/droid`.
///
/// # Panics
/// When that file does not exist, with the command that installs it.
pub fn real_droid() -> PathBuf {
    let path = std::env::var_os(DROID_ENV).map_or_else(
        || {
            workspace_root()
                .join("target/droid")
                .join(DROID_VERSION)
                .join("package/bin/droid")
        },
        PathBuf::from,
    );
    assert!(
        path.is_file(),
        "droid {DROID_VERSION} is not installed: run `cargo xtask fetch-droid` (installs the npm \
         package @factory/cli-linux-x64 under target/droid); looked for {}",
        path.display()
    );
    path
}

/// The `@factory/cli` launcher the suites lay out without its platform package.
pub const LAUNCHER_VERSION: &str = "0.225.1";

/// The package directory of the `@factory/cli` launcher [`LAUNCHER_VERSION`] (`bin/droid`, a Node
/// script, `package.json`, `platform.js`), as `cargo xtask fetch-droid` unpacks it under
/// `target/droid`.
///
/// # Panics
/// When it is not there, with the command that installs it.
pub fn droid_launcher() -> PathBuf {
    let dir = workspace_root()
        .join("target/droid")
        .join(format!("launcher-{LAUNCHER_VERSION}"))
        .join("package");
    assert!(
        dir.join("bin/droid").is_file() && dir.join("package.json").is_file(),
        "the @factory/cli {LAUNCHER_VERSION} launcher is not installed: run `cargo xtask \
         fetch-droid` (unpacks the npm package @factory/cli@{LAUNCHER_VERSION} under \
         target/droid); looked in {}",
        dir.display()
    );
    dir
}

/// The built `droid-executor`: `$CARGO_TARGET_DIR/debug` if set, else `<workspace>/target/debug`.
///
/// # Panics
/// When it has not been built, with the command that builds it (`cargo xtask test` does).
pub fn droid_executor_bin() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || workspace_root().join("target"),
        |dir| workspace_root().join(dir),
    );
    let bin = target.join("debug/droid-executor");
    assert!(
        bin.is_file(),
        "{} is missing: build it first: cargo build -p wrapper-cli (cargo xtask test does)",
        bin.display()
    );
    bin
}

/// The `fake-droid` binary of this crate, as a `PathBuf`. Only usable in this crate's test
/// binary (`tests/all.rs`), where Cargo sets `CARGO_BIN_EXE_fake-droid`.
#[macro_export]
macro_rules! fake_droid_bin {
    () => {
        ::std::path::PathBuf::from(env!("CARGO_BIN_EXE_fake-droid"))
    };
}

/// The `scripted-model` binary of this crate, as a `PathBuf`. Only usable in this crate's test
/// binary (`tests/all.rs`), where Cargo sets `CARGO_BIN_EXE_scripted-model`.
#[macro_export]
macro_rules! scripted_model_bin {
    () => {
        ::std::path::PathBuf::from(env!("CARGO_BIN_EXE_scripted-model"))
    };
}

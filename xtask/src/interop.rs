//! Installing the real MCP clients the interop suites drive, pinned: the Python SDK (`mcp` on
//! PyPI) in one venv per version under `target/interop/`. Both versions, because they differ on
//! the wire (2.x sends `notifications/cancelled` when a call is abandoned, 1.x sends nothing).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::sh::{output, workspace_root};

/// `(venv folder under target/interop, mcp version)`; the suite `mcp_python` expects these.
pub(crate) const PY_MCP: &[(&str, &str)] = &[("py-mcp2", "2.3.0"), ("py-mcp1", "1.30.0")];

/// The `mcp` version installed in the venv at `venv`, if it has a working Python and the package.
fn mcp_version(venv: &Path) -> Option<String> {
    let out = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('mcp'))",
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Make every venv of [`PY_MCP`] unless it already holds the right version; returns
/// `(version, venv)` pairs.
pub(crate) fn fetch() -> Result<Vec<(&'static str, PathBuf)>> {
    let root = workspace_root().join("target/interop");
    let mut venvs = Vec::new();
    for &(name, version) in PY_MCP {
        let venv = root.join(name);
        if mcp_version(&venv).as_deref() != Some(version) {
            install(&venv, version)?;
        }
        venvs.push((version, venv));
    }
    Ok(venvs)
}

/// A fresh venv at `venv` with `mcp==version` in it (whatever was there is removed first: a venv
/// left half-made by a failed `python3 -m venv` has no pip).
fn install(venv: &Path, version: &str) -> Result<()> {
    if Command::new("python3").arg("--version").output().is_err() {
        bail!(
            "python3 is needed to install the Python MCP SDK (mcp=={version}); install it with \
             venv support (e.g. apt-get install -y python3 python3-venv)"
        );
    }
    if venv.exists() {
        std::fs::remove_dir_all(venv).with_context(|| format!("remove {}", venv.display()))?;
    }
    let parent = venv.parent().context("venv path has a parent")?;
    std::fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
    eprintln!(
        "xtask: installing mcp=={version} (PyPI) in {} …",
        venv.display()
    );
    if let Err(e) = output(Command::new("python3").args(["-m", "venv"]).arg(venv)) {
        let _ = std::fs::remove_dir_all(venv);
        return Err(e.context(
            "`python3 -m venv` failed: the venv module (with ensurepip) is needed; on Debian/Ubuntu \
             install the python3-venv package (apt-get install -y python3-venv)",
        ));
    }
    let spec = format!("mcp=={version}");
    output(Command::new(venv.join("bin/python")).args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        &spec,
    ]))
    .with_context(|| format!("pip install {spec} failed (is PyPI reachable?)"))?;
    match mcp_version(venv) {
        Some(v) if v == version => Ok(()),
        Some(v) => bail!("{} has mcp {v}, expected {version}", venv.display()),
        None => bail!(
            "{}: `import importlib.metadata; version('mcp')` failed after pip install",
            venv.display()
        ),
    }
}

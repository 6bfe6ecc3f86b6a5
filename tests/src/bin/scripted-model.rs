//! `scripted-model --script FILE [--port N] [--port-file FILE] [--log FILE.jsonl]`: the scripted
//! chat-completions server of `tests::scripted_model` as a process, for manual runs and for
//! clients that are not Rust. The script file is re-read whenever it changes. Prints
//! `listening on http://127.0.0.1:PORT/v1` on stderr and serves until killed.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use tests::scripted_model::{Options, ScriptedModel};

const USAGE: &str =
    "usage: scripted-model --script FILE [--port N] [--port-file FILE] [--log FILE.jsonl]";

fn main() -> anyhow::Result<()> {
    let mut script_file = None;
    let mut port_file = None;
    let mut options = Options::default();
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .with_context(|| format!("{arg:?} needs a value\n{USAGE}"))
        };
        match arg.to_str() {
            Some("--script") => script_file = Some(PathBuf::from(value()?)),
            Some("--port") => {
                let port = value()?;
                options.port = port
                    .to_str()
                    .and_then(|p| p.parse().ok())
                    .with_context(|| format!("bad port {port:?}"))?;
            }
            Some("--port-file") => port_file = Some(PathBuf::from(value()?)),
            Some("--log") => options.log_file = Some(PathBuf::from(value()?)),
            _ => bail!("unexpected argument {arg:?}\n{USAGE}"),
        }
    }
    let script_file = script_file.context(USAGE)?;
    let text = std::fs::read(&script_file)
        .with_context(|| format!("reading {}", script_file.display()))?;
    let script = serde_json::from_slice(&text)
        .with_context(|| format!("parsing {}", script_file.display()))?;
    options.script_file = Some(script_file);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let server = ScriptedModel::start_with(script, options).await?;
        if let Some(port_file) = port_file {
            // Temp file and rename, so a poller never reads an empty port.
            let tmp = port_file.with_extension("tmp");
            std::fs::write(&tmp, format!("{}\n", server.port()))?;
            std::fs::rename(&tmp, &port_file)
                .with_context(|| format!("writing {}", port_file.display()))?;
        }
        eprintln!("listening on {}", server.base_url());
        std::future::pending::<anyhow::Result<()>>().await
    })
}

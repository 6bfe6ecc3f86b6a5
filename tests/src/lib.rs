//! Support code for droid-executor's integration tests: everything a suite needs to run the
//! engine and its front-ends against the **real** droid binary without a Factory account, plus
//! fakes for the failures the real binary cannot be made to produce on demand.
//!
//! - [`scripted_model`]: an OpenAI-compatible chat-completions server on 127.0.0.1 that answers
//!   from a JSON script (a port of the recorded fixtures' `mock.py`); the real droid talks to it
//!   as a BYOK custom model. Also the `scripted-model` binary.
//! - [`droid_home`]: a throw-away `HOME` whose `.factory/settings.json` points droid at those
//!   servers, and the environment to run droid with.
//! - [`droid_bin`]: where the real droid 0.225.2 is (tests fail, never skip, when it is missing),
//!   and the paths of this crate's own binaries ([`fake_droid_bin!`], [`scripted_model_bin!`]).
//! - [`fake_droid`](mod@fake_droid): the scenario player behind the `fake-droid` binary (crash, hang, ignore
//!   SIGTERM, leak a grandchild, flood stdout...).
//! - [`procs`]: is a pid alive, wait until it is gone, which processes carry a marker variable.
//! - [`temp_dir`]: a self-deleting temporary directory.
//! - [`repo_state`]: what a user has in a git repository, byte for byte (a worktree task must
//!   leave it as it was until its change is applied).
//! - [`acp_world`], [`acpx_world`]: the worlds of the ACP suites (SDK clients; acpx).
//! - [`non_root`]: a world for escape tests run as a non-root user whose HOME is outside the
//!   system temp directory.
//!
//! This crate is dev-only: nothing ships depends on it, and it depends on none of our crates, so
//! a suite can test any of them. Key choice: no HTTP or temp-file crates. The model server speaks
//! just enough HTTP/1.1 by hand over a tokio `TcpListener` and runs on its own thread and
//! runtime, so it keeps answering even while a test blocks its own thread, and dropping it stops
//! every connection, hanging ones included.

pub mod acp_world;
pub mod acpx_world;
pub mod agent_bin;
pub mod claude_home;
pub mod codex_home;
pub mod droid_bin;
pub mod droid_home;
pub mod fake_droid;
pub mod gemini_home;
mod http1;
pub mod non_root;
pub mod opencode_home;
pub mod procs;
pub mod repo_state;
pub mod scripted_model;
pub mod temp_dir;

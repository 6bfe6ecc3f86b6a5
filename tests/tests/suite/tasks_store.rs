//! The task store off the hot path (issue 17, item 3), as the CLI and the MCP server meet it: a
//! limited or filtered listing reads only the tasks it returns or skips, `tasks show` reads the
//! one task it shows and cleans nothing, the clean of expired tasks runs at most once a minute
//! per store (and still runs), and MCP `tasks/list` pages follow their cursor without reading
//! what came before. Costs are measured by `cargo xtask bench store`, never asserted here: these
//! tests prove the behaviour, using damaged entries (reported only when read) and expired ones
//! (removed only when a clean runs) as witnesses of what was read.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::binary::{FakeHome, Out, droid_executor};
use super::mcp_stdio::{Server, error_code, tool_result};

/// The fake droid's HOME, its store, and one real finished task to copy.
struct Home {
    home: FakeHome,
    model: String,
}

impl Home {
    async fn new(prefix: &str) -> Home {
        let home = FakeHome::new(prefix, &[]);
        home.play(&json!([{"completion": "Done."}]));
        let out = droid_executor(
            &["run", "--background", "--json", "Look around"],
            &home.env(),
            &home.repo(),
        )
        .await;
        assert_eq!(out.code, Some(0), "{out:#?}");
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        let model = v["task_id"].as_str().unwrap().to_owned();
        let me = Home { home, model };
        let (code, rec) = me
            .json(&["tasks", "wait", &me.model, "--timeout", "60", "--json"])
            .await;
        assert_eq!((code, rec["state"].clone()), (Some(0), json!("success")));
        // the copies below are older submissions: the model's number is above theirs
        let path = me.dir(&me.model).join("task.json");
        let mut meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        meta["seq"] = json!(1000);
        std::fs::write(&path, serde_json::to_vec(&meta).unwrap()).unwrap();
        me
    }

    async fn run(&self, args: &[&str]) -> Out {
        droid_executor(args, &self.home.env(), &self.home.repo()).await
    }

    async fn json(&self, args: &[&str]) -> (Option<i32>, Value) {
        let out = self.run(args).await;
        let v = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {out:#?}"));
        (out.code, v)
    }

    fn store(&self) -> PathBuf {
        self.home.file(".local/state/droid-executor")
    }

    fn dir(&self, id: &str) -> PathBuf {
        self.store().join("tasks").join(id)
    }

    /// A copy of the model task as `id`, submission number `seq`, its result's status `status`.
    fn copy(&self, id: &str, seq: u64, status: &str) {
        let from = self.dir(&self.model);
        let to = self.dir(id);
        std::fs::create_dir(&to).unwrap();
        for entry in std::fs::read_dir(&from).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            // the model's supervisor may still be removing its temp file and the reserve
            if name.starts_with('.') || name == "reserve" {
                continue;
            }
            let bytes = match std::fs::read(entry.path()) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => panic!("{}: {e}", entry.path().display()),
            };
            let bytes = match name.as_str() {
                "task.json" => {
                    let mut meta: Value = serde_json::from_slice(&bytes).unwrap();
                    meta["task_id"] = json!(id);
                    meta["seq"] = json!(seq);
                    serde_json::to_vec(&meta).unwrap()
                }
                "result.json" => {
                    let mut result: Value = serde_json::from_slice(&bytes).unwrap();
                    result["task_id"] = json!(id);
                    result["status"] = json!(status);
                    serde_json::to_vec(&result).unwrap()
                }
                _ => bytes,
            };
            std::fs::write(to.join(name), bytes).unwrap();
        }
    }

    /// An expired copy of the model task (its result committed three days ago).
    fn expired(&self, id: &str, seq: u64) {
        self.copy(id, seq, "success");
        age(&self.dir(id).join("result.json"), 3 * 86_400);
    }

    /// Date the last automatic clean two minutes back, so the next one is due.
    fn clean_due(&self) {
        age(&self.store().join("cleaned"), 120);
    }
}

fn age(path: &Path, secs: u64) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .set_modified(SystemTime::now() - Duration::from_secs(secs))
        .unwrap();
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list:#}"))
        .iter()
        .map(|r| r["task_id"].as_str().unwrap().to_owned())
        .collect()
}

fn old_id(k: u64) -> String {
    format!("droid-{}-{k:04x}", 1_700_000_000 + k)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limited_or_filtered_listing_reads_only_what_it_returns_or_skips() {
    let h = Home::new("tasks-store-list").await;
    // six older tasks, every other one failed, and an even older one whose task.json is damaged
    for k in 1..=6 {
        h.copy(&old_id(k), k, if k % 2 == 1 { "failed" } else { "success" });
    }
    h.copy(&old_id(0), 0, "success");
    std::fs::write(h.dir(&old_id(0)).join("task.json"), "{trunc").unwrap();
    let warning = format!("skipped task store entry {}", old_id(0));

    let out = h.run(&["tasks", "list", "--limit", "3", "--json"]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let listed = ids(&serde_json::from_str(&out.stdout).unwrap());
    assert_eq!(listed, [h.model.clone(), old_id(6), old_id(5)]);
    assert!(
        !out.stderr.contains(&warning),
        "the damaged oldest task was read for three newer ones: {out:#?}"
    );

    let out = h
        .run(&[
            "tasks", "list", "--state", "failed", "--limit", "2", "--json",
        ])
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let listed = ids(&serde_json::from_str(&out.stdout).unwrap());
    assert_eq!(listed, [old_id(5), old_id(3)]);
    assert!(!out.stderr.contains(&warning), "{out:#?}");

    // the whole listing reads everything, and names the damaged entry
    let out = h.run(&["tasks", "list", "--json"]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let listed = ids(&serde_json::from_str(&out.stdout).unwrap());
    let mut all = vec![h.model.clone()];
    all.extend((1..=6).rev().map(old_id));
    assert_eq!(listed, all);
    assert!(out.stderr.contains(&warning), "{out:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_show_cleans_nothing_and_the_clean_runs_at_most_once_a_minute() {
    let h = Home::new("tasks-store-clean").await;
    let (e, f, g) = (old_id(1), old_id(2), old_id(3));
    h.expired(&e, 1);

    // looking at one task reads that task: the expired one elsewhere stays
    let (code, rec) = h.json(&["tasks", "show", &h.model, "--json"]).await;
    assert_eq!(
        (code, rec["task_id"].as_str()),
        (Some(0), Some(h.model.as_str()))
    );
    assert!(h.dir(&e).is_dir(), "tasks show cleaned the store");

    // a listing cleans (none ran yet: the store had no tasks when the model was submitted),
    // then not again within the minute
    let (code, list) = h.json(&["tasks", "list", "--limit", "1", "--json"]).await;
    assert_eq!((code, ids(&list)), (Some(0), vec![h.model.clone()]));
    assert!(!h.dir(&e).exists(), "the due clean did not remove {e}");
    h.expired(&f, 2);
    let (code, list) = h.json(&["tasks", "list", "--limit", "1", "--json"]).await;
    assert_eq!((code, ids(&list)), (Some(0), vec![h.model.clone()]));
    assert!(h.dir(&f).is_dir(), "a second clean within the minute");

    // even when a clean is due, a look at one task does not clean
    h.clean_due();
    let (code, _) = h.json(&["tasks", "show", &h.model, "--json"]).await;
    assert_eq!(code, Some(0));
    assert!(h.dir(&f).is_dir(), "tasks show cleaned the store");

    // a foreground run's start-up cleans when due
    let out = h.run(&["run", "--json", "Look around"]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert!(
        !h.dir(&f).exists(),
        "the run's start-up clean did not remove {f}"
    );

    // an expired task looked at is gone at once, clean or not
    h.expired(&g, 3);
    let out = h.run(&["tasks", "show", &g, "--json"]).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(out.stderr.contains("expired"), "{out:#?}");
    assert!(!h.dir(&g).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_task_pages_follow_their_cursor_to_the_end() {
    let h = Home::new("tasks-store-mcp").await;
    // 120 older tasks (pages of 50), ten a second, and a damaged one older than all of them
    for k in 1..=120_u64 {
        let id = format!("droid-{}-{k:04x}", 1_700_000_000 + k / 10);
        h.copy(&id, k, "success");
    }
    let damaged = "droid-1600000000-dead";
    h.copy(damaged, 0, "success");
    std::fs::write(h.dir(damaged).join("task.json"), "{trunc").unwrap();
    let mut want = vec![h.model.clone()];
    want.extend(
        (1..=120_u64)
            .rev()
            .map(|k| format!("droid-{}-{k:04x}", 1_700_000_000 + k / 10)),
    );

    let mut s = Server::start(&h.home.env(), &h.home.repo());
    s.initialize().await;
    let mut seen = Vec::new();
    let mut pages = Vec::new();
    let mut params = json!({});
    for n in 0..10 {
        let page = tool_result(s.request(json!(n), "tasks/list", params.clone()).await);
        let tasks: Vec<String> = page["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["taskId"].as_str().unwrap().to_owned())
            .collect();
        pages.push(tasks.len());
        seen.extend(tasks);
        match page.get("nextCursor") {
            Some(c) => params = json!({"cursor": c}),
            None => break,
        }
    }
    assert_eq!(pages, [50, 50, 21]);
    assert_eq!(seen, want);

    // a cursor whose task is gone: list again from the start
    let gone = want[60].clone();
    std::fs::remove_dir_all(h.dir(&gone)).unwrap();
    let resp = s
        .request(json!("gone"), "tasks/list", json!({"cursor": gone}))
        .await;
    assert_eq!(error_code(&resp), -32602, "{resp:#}");
    assert!(
        resp["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("list again without a cursor")),
        "{resp:#}"
    );
    s.close_stdin();
    let (status, _) = s.exit_within(Duration::from_secs(30)).await;
    assert!(status.is_some_and(|st| st.success()), "{}", s.stderr());
}

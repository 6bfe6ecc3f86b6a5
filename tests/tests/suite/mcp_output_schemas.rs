//! Issue 32, item 8: every tool's every answer, success and error alike, matches the
//! `outputSchema` the tool declares, checked with a JSON Schema validator as the clients that
//! validate them do (the TypeScript SDK's `Client.callTool` throws `-32602 Structured content
//! does not match the tool's output schema` otherwise, losing the answer's text).
//!
//! One server with every toolset on (`all`) and the fake droid: each tool is called for a
//! success and for an error, and every answer's `structuredContent`, when there is one, is
//! validated against that tool's schema from `tools/list`; an answer that is not `isError` must
//! carry one. Before the fix, `droid_submit` answered an invalid request with a whole
//! ExecutionResult against its `{task_id}` schema.

use std::collections::BTreeMap;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::mcp_stdio::{Home, Server};

/// The droid's final message: an answer, then the report block the prompt asks for.
const ANSWER: &str = "The repository holds a.txt.\n\n```droid-executor-report\n{\"status\": \
                      \"success\", \"summary\": \"Looked at the repository.\", \"files\": [], \
                      \"issues\": []}\n```";

fn text(answer: &Value) -> &str {
    answer["content"][0]["text"].as_str().unwrap_or_default()
}

/// The task id of an answer whose structured content holds one.
fn task_id(answer: &Value) -> String {
    answer["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task_id: {answer:#}"))
        .to_owned()
}

/// Every answer, by tool, and the schemas to check them against.
struct Checked {
    schemas: BTreeMap<String, Value>,
    answers: BTreeMap<String, Vec<Value>>,
}

impl Checked {
    fn keep(&mut self, tool: &str, answer: &Value) {
        self.answers
            .entry(tool.to_owned())
            .or_default()
            .push(answer.clone());
    }

    /// Every answer against its tool's schema; each tool of `tools` answered at least once with
    /// success and once with an error.
    fn verify(&self, tools: &[&str]) {
        let mut bad = Vec::new();
        for tool in tools {
            let schema = &self.schemas[*tool];
            let validator = jsonschema::validator_for(schema)
                .unwrap_or_else(|e| panic!("{tool}: its outputSchema is not a schema: {e}"));
            let answers = self.answers.get(*tool).map_or(&[][..], Vec::as_slice);
            let errors = answers.iter().filter(|a| a["isError"] == true).count();
            if errors == 0 || errors == answers.len() {
                bad.push(format!(
                    "{tool}: {} answers, {errors} of them errors: need both",
                    answers.len()
                ));
            }
            for a in answers {
                match a.get("structuredContent") {
                    Some(sc) => {
                        for e in validator.iter_errors(sc) {
                            bad.push(format!("{tool}: {e} at {} in {a}", e.instance_path()));
                        }
                    }
                    None if a["isError"] == true => {}
                    None => bad.push(format!("{tool}: no structuredContent in {a}")),
                }
            }
        }
        assert!(bad.is_empty(), "{}", bad.join("\n"));
        eprintln!(
            "{} tools, {} answers, every one matching its outputSchema",
            tools.len(),
            self.answers.values().map(Vec::len).sum::<usize>()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_of_every_tool_matches_its_output_schema() {
    let home = Home::new(&json!([
        {"emit": {"type": "message", "role": "assistant", "text": ANSWER}},
        {"completion": ANSWER},
    ]));
    let mut env = home.env();
    env.push(("DROID_EXECUTOR_TOOLSETS".into(), "all".into()));
    let mut s = Server::start(&env, &home.repo());
    s.initialize().await;
    let list = s.request(json!("list"), "tools/list", json!({})).await;
    let tools = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list:#}"));
    let mut c = Checked {
        schemas: tools
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap_or_default().to_owned(),
                    t["outputSchema"].clone(),
                )
            })
            .collect(),
        answers: BTreeMap::new(),
    };
    assert_eq!(c.schemas.len(), 31, "{list:#}");
    let repo = home.repo().display().to_string();
    let unknown = json!({"task_id": "droid-1795349045-abcd"});
    let mut n = 0;
    let mut call = async |s: &mut Server, c: &mut Checked, tool: &str, args: Value| {
        n += 1;
        let answer = s.call(json!(n), tool, args).await;
        c.keep(tool, &answer);
        answer
    };

    // the droid tools
    call(
        &mut s,
        &mut c,
        "execute_droid_task",
        home.task("Look around"),
    )
    .await;
    let bad_context = json!({"objective": "x", "context": repo});
    call(&mut s, &mut c, "execute_droid_task", bad_context.clone()).await;
    let refused = call(&mut s, &mut c, "droid_submit", bad_context).await;
    assert_eq!(refused["isError"], true, "{refused:#}");
    assert!(
        text(&refused).contains("$.context: must be an object, got a string"),
        "the useful text is kept: {refused:#}"
    );
    let mut worktree = home.task("In a worktree");
    worktree["isolation"] = json!("worktree");
    let submitted = call(&mut s, &mut c, "droid_submit", worktree).await;
    let id = task_id(&submitted);
    let args = json!({"task_id": id, "wait_seconds": 60});
    let pended = call(&mut s, &mut c, "droid_pend", args).await;
    assert_eq!(
        pended["structuredContent"]["state"], "success",
        "{pended:#}"
    );
    call(&mut s, &mut c, "droid_pend", unknown.clone()).await;
    let checked = json!({"task_id": id, "check": true});
    call(&mut s, &mut c, "droid_apply", checked).await;
    call(&mut s, &mut c, "droid_apply", unknown.clone()).await;
    call(&mut s, &mut c, "droid_discard", json!({"task_id": id})).await;
    // a task that is not a worktree task's: refused, with the answer as structured content
    let plain = task_id(&call(&mut s, &mut c, "droid_submit", home.task("In place")).await);
    call(&mut s, &mut c, "droid_discard", json!({"task_id": plain})).await;
    let wait = json!({"task_id": plain, "wait_seconds": 60});
    call(&mut s, &mut c, "droid_pend", wait).await;
    call(&mut s, &mut c, "droid_cancel", json!({"task_id": plain})).await;
    call(&mut s, &mut c, "droid_cancel", json!({})).await;
    call(&mut s, &mut c, "droid_ping", json!({})).await;
    call(&mut s, &mut c, "droid_ping", json!({"x": 1})).await;

    // the shared family and droid's own family, each with and without waiting
    for (ask, pend, ping, cancel, provider) in [
        ("ask", "pend", "ping", "cancel", Some("droid")),
        (
            "ask_droid",
            "pend_droid",
            "ping_droid",
            "cancel_droid",
            None,
        ),
    ] {
        let with = |mut args: Value| {
            if let Some(p) = provider {
                args["provider"] = json!(p);
            }
            args
        };
        let asked = call(
            &mut s,
            &mut c,
            ask,
            with(json!({"message": "What is here?"})),
        )
        .await;
        let id = task_id(&asked);
        let waited = json!({"message": "What is here?", "wait_seconds": 60});
        let answered = call(&mut s, &mut c, ask, with(waited)).await;
        assert_eq!(
            answered["structuredContent"]["reply"], "The repository holds a.txt.",
            "the reply is the answer, without the report block: {answered:#}"
        );
        call(&mut s, &mut c, ask, json!({"message": 5})).await;
        let pended = call(
            &mut s,
            &mut c,
            pend,
            json!({"task_id": id, "wait_seconds": 60}),
        )
        .await;
        assert!(
            text(&pended).starts_with("droid replied:\nThe repository holds a.txt.\n\n"),
            "{pended:#}"
        );
        call(&mut s, &mut c, pend, json!({"wait_seconds": "soon"})).await;
        call(&mut s, &mut c, ping, with(json!({}))).await;
        call(&mut s, &mut c, ping, json!({"x": 1})).await;
        call(&mut s, &mut c, cancel, json!({"task_id": id})).await;
        call(&mut s, &mut c, cancel, json!({"task_id": 7})).await;
    }
    // every tool of the default list, and one provider's own family (the others are the same
    // code and schemas, for another provider)
    let mut checked = super::mcp_stdio::TOOLS.to_vec();
    checked.extend(["ask_droid", "pend_droid", "ping_droid", "cancel_droid"]);
    c.verify(&checked);
}

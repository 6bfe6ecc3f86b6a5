//! One turn of a session: the prompt goes to droid; droid's events become `session/update`s
//! as they come (a message chunk per token delta, tool calls with their diffs and output, the
//! plan); droid's permission requests are decided (`permission`); when droid ends the
//! turn, what the turn started and left running is ended (and found gone), what it changed
//! under `.git` that git runs later is put back, the repository is measured (and the session's
//! verification commands run), that measurement is sent as one more update, and the prompt is
//! answered. The answer and the reasoning are masked as they stream ([`StreamMask`]); every
//! message is masked again on its way out (`Agent::send`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use droid_exec::run::redact::Redactor;
use droid_exec::session::mask::StreamMask;
use droid_exec::session::tools::{self, ToolView};
use droid_exec::session::{SessionError, SessionEvent, TokenUsage};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Live, Session};
use crate::connection::Agent;
use crate::failure::{self, Failure};
use crate::jsonrpc::{self, RpcError};
use crate::prompt;
use crate::updates;

/// After an interrupt, how long droid gets to end the turn before it is restarted.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);
/// droid ends its turn when a tool is rejected (its own ACP mode too); the turn goes on with
/// one more message to droid saying what was rejected, at most this many times per turn.
const MAX_CONTINUATIONS: usize = 3;
/// The start of the messages this agent adds to droid's conversation (left out of replays).
pub(super) const NOTE_PREFIX: &str = "[droid-executor]";
/// What droid's result of a tool it did not run says, the user having rejected it or the turn
/// being cancelled (its own words, the same in both cases).
const DROID_CANCELLED: &str = "Tool execution cancelled by user";
/// A rejected tool's result, in our words.
const REJECTED: &str = "Rejected by the user: droid did not run it.";
/// A tool stopped by a cancelled turn, in our words.
const CANCELLED: &str = "Cancelled: the turn was stopped before this finished.";

/// droid's result of a tool, in our words where droid's are its own ("cancelled by user" for
/// a tool the user rejected).
pub(super) fn result_text(
    content: &str,
    is_error: bool,
    rejected: bool,
    cancelled: bool,
) -> String {
    let droids = content.trim().trim_start_matches("Error: ").trim();
    if is_error && droids.starts_with(DROID_CANCELLED) {
        if rejected {
            return REJECTED.to_owned();
        }
        if cancelled {
            return CANCELLED.to_owned();
        }
    }
    content.to_owned()
}

/// Whether a tool of `class` can leave a process behind (commands, and tools we do not know).
fn may_start_processes(class: tools::ToolClass) -> bool {
    use tools::ToolClass::{Delete, Execute, Other, Think};
    matches!(class, Execute | Delete | Other | Think)
}

/// How a turn ends for the client.
enum Outcome {
    /// Its answer.
    Answer(Value),
    /// Its error, and the cause in our words ([`failure`]) for the chat.
    Failed(RpcError, String),
}

/// How a turn ends for the client: its answer, or its error with the cause in our words.
fn outcome(
    ending: &Ending,
    interrupted: bool,
    timed_out: bool,
    budget: Duration,
    errors: &[String],
    tail: &str,
) -> Outcome {
    if timed_out {
        let secs = budget.as_secs();
        return Outcome::Failed(
            RpcError::new(
                jsonrpc::TIMEOUT_ERROR,
                format!(
                    "the turn ran longer than {secs} s (the default_timeout setting) and was stopped"
                ),
            ),
            failure::message(Failure::TimedOut { secs }),
        );
    }
    if interrupted {
        return Outcome::Answer(json!({"stopReason": "cancelled"}));
    }
    match ending {
        Ending::Droid(reason) => {
            let why = || {
                failure::message(Failure::Droid {
                    reason: reason.as_str(),
                    errors,
                })
            };
            match reason.as_str() {
                "completed" => Outcome::Answer(json!({"stopReason": "end_turn"})),
                "cancelled" => Outcome::Answer(json!({"stopReason": "cancelled"})),
                "max_turns" | "max_turns_reached" => {
                    Outcome::Answer(json!({"stopReason": "max_turn_requests"}))
                }
                "model_authentication_failed" => Outcome::Failed(
                    RpcError::new(
                        jsonrpc::AUTHENTICATION_FAILED,
                        format!("Authentication failed: {}", errors.join("; ")),
                    )
                    .with_data(json!({
                        "envVar": "FACTORY_API_KEY",
                        "alternative": "customModels in ~/.factory/settings.json, or log in with droid",
                    })),
                    why(),
                ),
                other => Outcome::Failed(
                    RpcError::new(
                        jsonrpc::FACTORY_API_ERROR,
                        format!(
                            "the turn failed ({other}){}",
                            if errors.is_empty() {
                                String::new()
                            } else {
                                format!(": {}", errors.join("; "))
                            }
                        ),
                    )
                    .with_data(json!({"reason": other, "errors": errors})),
                    why(),
                ),
            }
        }
        Ending::Exited => Outcome::Failed(
            RpcError::new(
                jsonrpc::PROCESS_ERROR,
                format!(
                    "droid exited during the turn{}; the next prompt restarts it on this session's history",
                    if tail.trim().is_empty() {
                        String::new()
                    } else {
                        format!(": {}", tail.trim())
                    }
                ),
            ),
            failure::message(Failure::Exited { tail }),
        ),
    }
}

/// What a tool call of the running turn is.
#[derive(Debug)]
pub(super) struct Call {
    /// Its input, as complete as droid has sent it.
    pub(super) input: Value,
    /// How it is shown.
    pub(super) view: ToolView,
    /// Whether its `tool_call` was sent.
    pub(super) announced: bool,
}

/// How a turn ended.
enum Ending {
    Droid(String),
    Exited,
}

impl Session {
    /// Run one turn of `built` on `live` (droid restarted first if it died); `token` cancels it.
    pub(super) async fn turn(
        &self,
        agent: &Arc<Agent>,
        live: &mut Live,
        built: &prompt::Prompt,
        token: &CancellationToken,
    ) -> Result<Value, RpcError> {
        if live.droid.exited().await {
            self.revive(agent, live).await?;
        }
        let n = self
            .turns
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // events left from before (settings echoes) are not this turn's
        while let Ok(ev) = live.events.try_recv() {
            if ev == SessionEvent::Exited {
                self.revive(agent, live).await?;
            }
        }
        let droid = live.droid.clone();
        // the repository is recorded while droid starts on the prompt: droid (at autonomy
        // `off`) changes nothing without asking, and no permission is answered before the
        // recording is done, so the first token is not held up by it
        let meter = &self.meter;
        let begin_droid = droid.clone();
        let mut begin = std::pin::pin!(async move { meter.lock().await.begin(&begin_droid).await });
        let mut measuring: Option<Result<(), String>> = None;
        if let Err(e) = droid.prompt_with_images(&built.text, &built.images).await {
            return Err(match e {
                SessionError::Timeout { .. } => {
                    RpcError::new(jsonrpc::TIMEOUT_ERROR, e.to_string())
                }
                other => RpcError::new(jsonrpc::PROCESS_ERROR, other.to_string()),
            });
        }
        let budget = agent.engine.config().default_timeout;
        let deadline = tokio::time::Instant::now() + budget;
        let mut calls: HashMap<String, Call> = HashMap::new();
        let mut errors: Vec<String> = Vec::new();
        let mut interrupted = false;
        let mut timed_out = false;
        let mut grace: Option<tokio::time::Instant> = None;
        let mut rejected: Vec<String> = Vec::new();
        // the tool calls the user rejected in this turn
        let mut rejected_ids: HashSet<String> = HashSet::new();
        let mut continuations = 0;
        // tokens: the session's so far (droid's last count), this turn's
        let mut session_tokens: Option<TokenUsage> = None;
        let mut turn_tokens: Option<TokenUsage> = None;
        // whether the answer streamed any text (a failure's message starts a new paragraph)
        let mut said = false;
        let mut streams = Streams::new(agent.redact());
        // whether a tool that can start processes ran
        let mut started = false;
        let ending = loop {
            let ev = tokio::select! {
                ev = live.events.recv() => ev,
                r = &mut begin, if measuring.is_none() => {
                    measuring = Some(r);
                    continue;
                }
                () = token.cancelled(), if !interrupted => {
                    interrupted = true;
                    grace = Some(tokio::time::Instant::now() + INTERRUPT_GRACE);
                    if let Err(e) = droid.interrupt().await {
                        tracing::warn!("interrupting droid: {e}");
                    }
                    continue;
                }
                () = tokio::time::sleep_until(deadline), if !timed_out && !interrupted => {
                    timed_out = true;
                    interrupted = true;
                    grace = Some(tokio::time::Instant::now() + INTERRUPT_GRACE);
                    let _ = droid.interrupt().await;
                    continue;
                }
                () = async { match grace { Some(g) => tokio::time::sleep_until(g).await, None => std::future::pending().await } } => {
                    // droid did not end the turn: it is restarted on its stored session next time
                    droid.close().await;
                    break Ending::Exited;
                }
            };
            let Some(ev) = ev else { break Ending::Exited };
            // what the streams kept back goes out before anything else (see `Streams`)
            match &ev {
                SessionEvent::TextDelta { .. } => streams.flush_thought(agent, &self.id).await,
                SessionEvent::ThinkingDelta { .. } => {
                    streams.flush_message(agent, &self.id).await;
                }
                _ => streams.flush(agent, &self.id).await,
            }
            match ev {
                SessionEvent::TextDelta { text, .. } => {
                    said |= !text.is_empty();
                    let text = streams.message.push(&text);
                    if !text.is_empty() {
                        agent.update(&self.id, updates::message_chunk(&text)).await;
                    }
                }
                SessionEvent::ThinkingDelta { text } => {
                    let text = streams.thought.push(&text);
                    if !text.is_empty() {
                        agent.update(&self.id, updates::thought_chunk(&text)).await;
                    }
                }
                SessionEvent::ToolUse { id, name, input } => {
                    let complete = input.as_object().is_some_and(|o| !o.is_empty());
                    let view = tools::view(&name, &input, &self.root);
                    // the file is not changed yet: where the edit lands, for "follow the agent"
                    let view = if complete {
                        view.with_edit_line()
                    } else {
                        view
                    };
                    if name == "TodoWrite" && complete {
                        agent
                            .update(&self.id, updates::plan(&tools::plan(&input)))
                            .await;
                    }
                    let call = calls.entry(id.clone()).or_insert_with(|| Call {
                        input: input.clone(),
                        view: view.clone(),
                        announced: false,
                    });
                    if complete {
                        call.input = input;
                        call.view = view;
                        if call.announced {
                            agent
                                .update(
                                    &self.id,
                                    updates::tool_call_refined(&id, &call.view, &call.input),
                                )
                                .await;
                        } else {
                            call.announced = true;
                            agent
                                .update(
                                    &self.id,
                                    updates::tool_call(&id, &call.view, &call.input, "pending"),
                                )
                                .await;
                        }
                    }
                }
                SessionEvent::ToolExecuting { id } => {
                    self.announce(agent, &mut calls, &id).await;
                    started |= calls
                        .get(&id)
                        .is_none_or(|c| may_start_processes(c.view.class));
                    agent
                        .update(&self.id, updates::tool_status(&id, "in_progress"))
                        .await;
                }
                SessionEvent::ToolResult {
                    id,
                    content,
                    is_error,
                } => {
                    self.announce(agent, &mut calls, &id).await;
                    started |= calls
                        .get(&id)
                        .is_none_or(|c| may_start_processes(c.view.class));
                    let view = calls.get(&id).map(|c| &c.view);
                    let content =
                        result_text(&content, is_error, rejected_ids.contains(&id), interrupted);
                    agent
                        .update(
                            &self.id,
                            updates::tool_result(&id, view, &content, is_error),
                        )
                        .await;
                }
                SessionEvent::Permission(req) => {
                    if measuring.is_none() {
                        measuring = Some((&mut begin).await);
                    }
                    let option = if interrupted {
                        "cancel"
                    } else {
                        self.decide(agent, &mut calls, &req, token, deadline).await
                    };
                    if option == "cancel" && !token.is_cancelled() {
                        rejected.extend(
                            req.tools
                                .iter()
                                .filter_map(|t| calls.get(&t.id).map(|c| c.view.title.clone())),
                        );
                        for t in &req.tools {
                            rejected_ids.insert(t.id.clone());
                        }
                        self.keep(|o| {
                            for t in &req.tools {
                                o.reject(&t.id);
                            }
                        });
                    }
                    if let Err(e) = droid.answer_permission(&req.request_id, option).await {
                        tracing::warn!("answering droid's permission request: {e}");
                    }
                }
                SessionEvent::TurnCompleted { reason, tokens } => {
                    if let Some((input, output)) = tokens {
                        let t = turn_tokens.get_or_insert_with(TokenUsage::default);
                        t.input += input;
                        t.output += output;
                    }
                    // droid stops at a rejected tool; the user only said no to that tool
                    if reason == "completed"
                        && !rejected.is_empty()
                        && !interrupted
                        && continuations < MAX_CONTINUATIONS
                    {
                        continuations += 1;
                        let note = format!(
                            "{NOTE_PREFIX} The user rejected: {}. Do not do that; go on with the rest of the task, or say what you need instead.",
                            rejected.join("; ")
                        );
                        rejected.clear();
                        match droid.prompt(&note).await {
                            Ok(()) => continue,
                            Err(e) => tracing::warn!("continuing after a rejection: {e}"),
                        }
                    }
                    break Ending::Droid(reason);
                }
                SessionEvent::Error { message } => {
                    if !errors.contains(&message) {
                        errors.push(message);
                    }
                }
                SessionEvent::Retry { attempt, reason } => {
                    tracing::info!("droid retries the model (attempt {attempt}, {reason})");
                }
                SessionEvent::Settings(s) => {
                    if let Ok(mut st) = self.settings.lock()
                        && let Some(m) = s.get("modelId").and_then(Value::as_str)
                    {
                        st.model = m.to_owned();
                    }
                }
                SessionEvent::Usage(u) => session_tokens = Some(u),
                SessionEvent::Exited => break Ending::Exited,
                SessionEvent::Title(_) | SessionEvent::Ignored(_) => {}
            }
        };
        streams.flush(agent, &self.id).await;
        let tail = match ending {
            Ending::Exited => droid.stderr_tail(),
            Ending::Droid(_) => String::new(),
        };
        let outcome = outcome(&ending, interrupted, timed_out, budget, &errors, &tail);
        // a failed turn says why in the chat too, in our words (some clients show no error)
        if let Outcome::Failed(_, why) = &outcome {
            let text = if said {
                format!("\n\n{why}")
            } else {
                why.clone()
            };
            agent.update(&self.id, updates::message_chunk(&text)).await;
        }
        if measuring.is_none() {
            measuring = Some((&mut begin).await);
        }
        // droid gone: it and everything it started end before the repository is measured
        if matches!(ending, Ending::Exited) {
            droid.close().await;
        }
        // nothing the turn started outlives it (droid itself and its MCP servers stay), and the
        // repository is measured once it is gone
        let measure = {
            let mut meter = self.meter.lock().await;
            let mut m = meter.finish(&droid, started, &self.verify, token).await;
            if let Some(Err(e)) = measuring {
                m.warnings.push(format!(
                    "the repository could not be recorded when the turn started: {e}"
                ));
            }
            m
        };
        // only a turn that changed something (or has something to say) gets the tool call
        if updates::worth_reporting(&measure) {
            agent
                .update(
                    &self.id,
                    updates::measured(
                        &format!("measured-{n}"),
                        &self.root.display().to_string(),
                        &measure,
                    ),
                )
                .await;
        }
        if !matches!(ending, Ending::Exited) {
            match droid.context_stats().await {
                Ok(stats) => {
                    agent
                        .update(&self.id, updates::usage(stats, turn_tokens, session_tokens))
                        .await;
                }
                Err(e) => tracing::debug!("no usage_update: {e}"),
            }
        }
        match outcome {
            Outcome::Answer(answer) => Ok(answer),
            Outcome::Failed(error, _) => Err(error),
        }
    }

    /// Send the `tool_call` of `id` if it was not sent yet (droid reported its execution or
    /// result before its complete input).
    async fn announce(&self, agent: &Agent, calls: &mut HashMap<String, Call>, id: &str) {
        let call = calls.entry(id.to_owned()).or_insert_with(|| Call {
            input: Value::Null,
            view: tools::view("", &Value::Null, &self.root),
            announced: false,
        });
        if !call.announced {
            call.announced = true;
            agent
                .update(
                    &self.id,
                    updates::tool_call(id, &call.view, &call.input, "pending"),
                )
                .await;
        }
    }
}

/// The turn's answer and reasoning, each masked as it streams ([`StreamMask`]): what one kept
/// back goes out before any other update, so the client sees everything in order.
struct Streams {
    message: StreamMask,
    thought: StreamMask,
}

impl Streams {
    fn new(redact: Redactor) -> Self {
        Self {
            message: StreamMask::new(redact.clone()),
            thought: StreamMask::new(redact),
        }
    }

    async fn flush_message(&mut self, agent: &Agent, id: &str) {
        let text = self.message.flush();
        if !text.is_empty() {
            agent.update(id, updates::message_chunk(&text)).await;
        }
    }

    async fn flush_thought(&mut self, agent: &Agent, id: &str) {
        let text = self.thought.flush();
        if !text.is_empty() {
            agent.update(id, updates::thought_chunk(&text)).await;
        }
    }

    async fn flush(&mut self, agent: &Agent, id: &str) {
        self.flush_thought(agent, id).await;
        self.flush_message(agent, id).await;
    }
}

//! [`RemoteAgentTool`]: one remote A2A agent as the tool `a2a__<name>`.

use std::sync::{Arc, Mutex};

use agw_tools::{Tool, ToolContext, ToolError, ToolOutput, a2a_tool_name};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::client::Remote;
use crate::config::RemoteAgentConfig;

/// A remote A2A agent offered to models (see the crate docs).
pub struct RemoteAgentTool {
    name: String,
    description: String,
    remote: Arc<Remote>,
}

impl std::fmt::Debug for RemoteAgentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteAgentTool").field("name", &self.name).finish_non_exhaustive()
    }
}

/// The tools of `configs`: each agent's card is read now (a few seconds at most) for its
/// description and skills; an agent whose card cannot be read is offered with its declared
/// description (or a plain one) and its card is read again at its first call.
pub async fn tools_of(configs: Vec<RemoteAgentConfig>) -> Vec<Arc<dyn Tool>> {
    let loaded = configs.into_iter().map(|config| async move {
        let remote = Arc::new(Remote::new(config));
        let card = tokio::time::timeout(std::time::Duration::from_secs(5), remote.card()).await;
        let name = a2a_tool_name(&remote.config.name);
        let mut description = remote.config.description.clone().unwrap_or_default();
        match card {
            Ok(Ok(card)) => {
                if description.is_empty() {
                    description = format!("{}: {}", card.name, card.description.trim());
                    for (skill, about) in card.skills.iter().take(10) {
                        description.push_str(&format!("\n- {skill}: {}", about.trim()));
                    }
                }
            }
            Ok(Err(e)) => tracing::warn!(agent = %remote.config.name, error = %e, "remote A2A agent's card not read"),
            Err(_) => tracing::warn!(agent = %remote.config.name, "remote A2A agent's card not read in time"),
        }
        if description.is_empty() {
            description = format!("The remote agent {}", remote.config.name);
        }
        let description = format!(
            "Ask a remote agent (A2A). {description}\nSend it your whole request as `message`; it answers with its \
             task's state and answer. When its state is input_required it asks you something (see question): \
             answer it with the same tool, its taskId and your answer as message."
        );
        Arc::new(RemoteAgentTool { name, description, remote }) as Arc<dyn Tool>
    });
    futures::future::join_all(loaded).await
}

/// The remote conversation of a chat at an agent: the same for every call from that chat, and
/// nothing the remote could read the chat's id from.
fn context_id(chat_id: &str, agent: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("agw-a2a\0{chat_id}\0{agent}"));
    format!("agw-{}", hex::encode(&digest[..16]))
}

/// Cancels the remote task when the call is dropped before it ended (an interrupt, a timeout).
struct CancelOnDrop {
    remote: Arc<Remote>,
    task: Arc<Mutex<Option<String>>>,
    done: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let task = self.task.lock().ok().and_then(|t| t.clone());
        if let (Some(task), Ok(runtime)) = (task, tokio::runtime::Handle::try_current()) {
            let remote = self.remote.clone();
            runtime.spawn(async move { remote.cancel(&task).await });
        }
    }
}

impl Tool for RemoteAgentTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "message": {"type": "string", "description": "What to ask or tell the agent: its whole message."},
                "taskId": {"type": "string", "description": "Only to answer a task of this agent that asked for input (state input_required): its taskId."}
            },
            "required": ["message"]
        })
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.ask(args, ctx, None))
    }

    fn call_streaming<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
        text: futures::channel::mpsc::UnboundedSender<String>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.ask(args, ctx, Some(text)))
    }
}

impl RemoteAgentTool {
    /// One call: the message sent, the answer's text to `text` as it arrives (when given).
    async fn ask(
        &self,
        args: Value,
        ctx: &ToolContext,
        text: Option<futures::channel::mpsc::UnboundedSender<String>>,
    ) -> Result<ToolOutput, ToolError> {
        // The user's reply to the question this call paused with goes to that remote task.
        let replied = ctx.reply.as_ref().and_then(|reply| {
            let task = reply.paused_with.get("taskId").and_then(Value::as_str)?.to_owned();
            let text = match &reply.answer {
                Value::String(text) => text.clone(),
                Value::Object(map) => map.get("text").and_then(Value::as_str).map(str::to_owned)?,
                other => other.to_string(),
            };
            Some((text, task))
        });
        let message = match &replied {
            Some((text, _)) => text.trim(),
            None => args.get("message").and_then(Value::as_str).map(str::trim).unwrap_or_default(),
        };
        if message.is_empty() {
            return Err(ToolError::InvalidArguments("message is required".into()));
        }
        let task_id = match &replied {
            Some((_, task)) => Some(task.as_str()),
            None => args.get("taskId").and_then(Value::as_str).map(str::trim).filter(|t| !t.is_empty()),
        };
        let agent = self.remote.config.name.clone();
        let context = context_id(&ctx.chat_id, &agent);
        let task = Arc::new(Mutex::new(task_id.map(str::to_owned)));
        let mut guard = CancelOnDrop { remote: self.remote.clone(), task: task.clone(), done: false };
        let mut on_task = |id: &str| {
            if let Ok(mut slot) = task.lock() {
                *slot = Some(id.to_owned());
            }
        };
        let mut on_text = |delta: &str| {
            if let Some(text) = &text
                && !delta.is_empty()
            {
                let _ = text.unbounded_send(delta.to_owned());
            }
        };
        let on = crate::client::Observers { task: &mut on_task, text: &mut on_text };
        let sent =
            tokio::time::timeout(self.remote.config.timeout, self.remote.send(message, &context, task_id, on)).await;
        // A remote task that waits for its caller, or has ended, is not cancelled.
        let outcome = match sent {
            Ok(Ok(outcome)) => {
                guard.done = !matches!(outcome.state.as_str(), "working" | "submitted");
                outcome
            }
            Ok(Err(error)) => {
                guard.done = true;
                tracing::warn!(agent = %agent, error = %error, "remote A2A call failed");
                // Never retried as a failure: the remote may have acted on the message.
                return Ok(ToolOutput::Json(
                    json!({"agent": agent, "ok": false, "state": "error", "error": error.to_string()}),
                ));
            }
            Err(_) => {
                return Ok(ToolOutput::Json(json!({"agent": agent, "ok": false, "state": "timeout",
                    "error": format!("the agent did not answer within {} s", self.remote.config.timeout.as_secs())})));
            }
        };
        if outcome.state == "input_required" && self.remote.config.ask_user {
            // The run's user answers: the run pauses with the question, and the answer comes
            // back as this call's reply.
            let question = outcome.status_text.clone().unwrap_or_else(|| format!("{agent} asks for input"));
            let mut data = json!({"agent": agent, "taskId": outcome.task_id, "answerWith": "text"});
            if let Some(asked) = outcome.asked.clone() {
                data["asked"] = asked;
            }
            return Ok(ToolOutput::NeedsUser(agw_tools::UserStatus::new(question).with_data(data)));
        }
        let mut result = json!({
            "agent": agent,
            "ok": outcome.state == "completed",
            "state": outcome.state,
            "taskId": outcome.task_id,
            "answer": outcome.answer,
        });
        if let Some(text) = outcome.status_text {
            result["question"] = json!(text);
        }
        if let Some(asked) = outcome.asked {
            result["asked"] = asked;
        }
        Ok(ToolOutput::Json(result))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_chat_keeps_one_context_per_agent_and_shows_none_of_its_id() {
        let a = super::context_id("chat-1", "helper");
        assert_eq!(a, super::context_id("chat-1", "helper"));
        assert_ne!(a, super::context_id("chat-2", "helper"));
        assert_ne!(a, super::context_id("chat-1", "other"));
        assert!(!a.contains("chat-1"));
    }
}

//! Structured output (docs/models.md): a turn whose answer may be the run's is checked against
//! the output schema. A match streams as the run's output; a mismatch is withdrawn
//! (`content.revoke`, guard `output-schema`) and the model gets one repair turn that tells it
//! what was wrong. A second mismatch ends the run with `output_invalid`.

use agw_llm::ChatMessage;
use agw_protocol::AgentDelta;
use agw_protocol::guard::Revocation;

use crate::definition::{AnswerMismatch, OutputSchema};

use super::turn::{TurnOutput, TurnSpec, stream_turn};
use super::{DeltaSink, RunContext, RunFailure, RunState};

/// Checks `out`, the answer of `spec`'s turn, against `schema`: a turn that called tools or said
/// nothing is not an answer and passes as it is.
pub(super) async fn checked<S: DeltaSink>(
    ctx: &RunContext,
    mut spec: TurnSpec<'_>,
    schema: &OutputSchema,
    out: TurnOutput,
    state: &mut RunState,
    sink: &mut S,
) -> Result<TurnOutput, RunFailure> {
    if out.has_calls() || out.text.trim().is_empty() {
        return Ok(out);
    }
    let problem = match schema.check(&out.text) {
        Ok(value) => {
            sink.emit(AgentDelta::Output(value)).await?;
            return Ok(out);
        }
        Err(problem) => problem,
    };
    tracing::info!(run_id = %ctx.run_id, %problem, "the answer does not match the output schema: one repair turn");
    sink.emit(AgentDelta::Revoke(Revocation {
        guard: agw_protocol::guard::OUTPUT_SCHEMA_GUARD.to_owned(),
        rule: None,
        reason: problem.to_string(),
    }))
    .await?;
    // The model sees what it wrote and what is wrong with it, and must answer now.
    spec.messages.push(ChatMessage::Assistant { content: out.text, tool_calls: Vec::new() });
    spec.messages.push(ChatMessage::user(repair_request(&problem)));
    let stage = format!("{}-output-repair", spec.stage_name);
    spec.stage_name = &stage;
    spec.tool_choice = None;
    let mut repaired = stream_turn(ctx, &mut spec, Some(schema), state, sink).await?;
    match schema.check(&repaired.text) {
        Ok(value) => {
            sink.emit(AgentDelta::Output(value)).await?;
            // What the turn took before the repair is still what it took.
            let mut steers = out.steers;
            steers.append(&mut repaired.steers);
            repaired.steers = steers;
            Ok(repaired)
        }
        Err(problem) => Err(RunFailure::OutputInvalid(problem)),
    }
}

/// The user message of the repair turn.
fn repair_request(problem: &AnswerMismatch) -> String {
    format!(
        "Your answer cannot be used: {problem}. Answer again with only the corrected JSON object, \
         matching the required JSON Schema, and nothing else."
    )
}

/// What a model with prompted tool calling is told about the answer's shape (it gets no
/// response format in turns that offer tools, where it must be free to write tool calls).
pub(super) fn prompted_instruction(schema: &OutputSchema) -> String {
    format!(
        "\n\n# Answer format\n\nWhen you answer (without calling a tool), answer with only a JSON object that \
         matches this JSON Schema, and nothing else:\n{}",
        schema.schema()
    )
}

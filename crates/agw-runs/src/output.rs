//! A run's output schema (structured output, docs/models.md): the request's `outputSchema` in
//! place of the agent's, for a new run and for one continued in another process.

use std::sync::Arc;

use agw_modes::definition::AgentDefinition;
use agw_protocol::QueryRequest;

/// The agent as a run of `request` uses it: with the request's `outputSchema` (structured
/// output, docs/models.md) in place of its own.
pub(crate) fn with_output_schema(
    agent: Arc<AgentDefinition>,
    request: &QueryRequest,
) -> Result<Arc<AgentDefinition>, agw_modes::definition::OutputSchemaError> {
    let Some(schema) = &request.output_schema else { return Ok(agent) };
    let mut shaped = (*agent).clone();
    shaped.output_schema = Some(agw_modes::definition::OutputSchema::compile(schema.clone())?);
    Ok(Arc::new(shaped))
}

/// The agent a run continued in another process uses: its stored query's `outputSchema`
/// applies again (it was checked when the run started; should that fail now, the agent's own).
pub(crate) fn continued_agent(agent: Arc<AgentDefinition>, query: &QueryRequest) -> Arc<AgentDefinition> {
    match with_output_schema(agent.clone(), query) {
        Ok(shaped) => shaped,
        Err(error) => {
            tracing::warn!(%error, "the run's outputSchema no longer compiles; the agent's own applies");
            agent
        }
    }
}

//! A run's images and files (docs/models.md "Images and files"): the request's, checked, and
//! refused before anything runs when a model of the agent cannot take them.

use agw_llm::request::{Attachment, AttachmentKind};
use agw_modes::definition::{AgentDefinition, StageKind};
use agw_protocol::QueryRequest;

use crate::RunError;
use crate::service::Core;

/// The attachments of `request`, once every one is usable and every model the agent's mode
/// starts with takes its kind.
///
/// # Errors
/// [`RunError::Invalid`] naming the attachment, or the model that cannot take it.
pub(crate) fn for_run(
    core: &Core,
    agent: &AgentDefinition,
    request: &QueryRequest,
) -> Result<Vec<Attachment>, RunError> {
    let Some(references) = request.references.as_deref() else { return Ok(Vec::new()) };
    let attachments =
        agw_protocol::attachment::from_references(references).map_err(|e| RunError::invalid(e.to_string()))?;
    let providers = &core.catalogs.providers;
    for kind in [AttachmentKind::Image, AttachmentKind::Pdf] {
        let Some(first) = attachments.iter().find(|a| a.kind() == kind) else { continue };
        for &stage in stages(agent) {
            let model = agent.resolve_model(stage, |key| providers.default_model(key));
            if !providers.attachments(&model.provider_key).takes(kind) {
                let name = first.name.as_deref().unwrap_or("unnamed");
                return Err(RunError::invalid(format!(
                    "agent {} runs on {}/{}, which does not take {}s ({name}); see the provider setting attachments",
                    agent.key,
                    model.provider_key,
                    model.model,
                    kind.as_str()
                )));
            }
        }
    }
    Ok(attachments)
}

/// The stages of the agent's mode.
fn stages(agent: &AgentDefinition) -> &'static [StageKind] {
    use agw_modes::definition::AgentMode;
    match agent.mode_kind() {
        AgentMode::Oneshot => &[StageKind::Plain],
        AgentMode::React => &[StageKind::React],
        AgentMode::PlanExecute => &[StageKind::Plan, StageKind::Execute, StageKind::Summary],
    }
}

/// The attachments of a stored query (a run continued in another process): they passed when
/// it started; should one no longer pass, the run goes on without them.
pub(crate) fn of_stored(query: &QueryRequest) -> Vec<Attachment> {
    let Some(references) = query.references.as_deref() else { return Vec::new() };
    agw_protocol::attachment::from_references(references).unwrap_or_else(|error| {
        tracing::warn!(%error, "the run's stored attachments no longer pass; it goes on without them");
        Vec::new()
    })
}

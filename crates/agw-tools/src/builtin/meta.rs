//! Metadata of the built-in tools. The bundled definition files (`fixtures/tools/*.backend`) are
//! the single place where descriptions, schemas and after-call hints are written; an
//! implementation reports the same metadata when no definition file is loaded.

use std::collections::HashMap;
use std::sync::LazyLock;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::bundled::TOOL_FILES;
use crate::definition::{ToolDef, ToolKind, default_parameters, parse_file};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

static BUNDLED: LazyLock<HashMap<String, ToolDef>> = LazyLock::new(|| {
    TOOL_FILES
        .iter()
        .filter(|(name, _)| ToolKind::from_file_name(name) == Some(ToolKind::Backend))
        .filter_map(|(name, text)| parse_file(ToolKind::Backend, name, text).ok())
        .flat_map(|parsed| parsed.defs)
        .map(|def| (def.name.clone(), def))
        .collect()
});

/// The bundled definition of a built-in tool, if one ships.
pub(crate) fn bundled(name: &str) -> Option<&'static ToolDef> {
    BUNDLED.get(name)
}

pub(crate) fn description(name: &str) -> &'static str {
    bundled(name).map_or("", |def| def.description.as_str())
}

pub(crate) fn after_call_hint(name: &str) -> &'static str {
    bundled(name).map_or("", |def| def.after_call_hint.as_str())
}

pub(crate) fn parameters(name: &str) -> Value {
    bundled(name).map_or_else(default_parameters, |def| def.parameters.clone())
}

/// A built-in whose work is a pure function of its arguments (the mock tools).
pub(crate) struct PureTool {
    pub name: &'static str,
    pub run: fn(&Value) -> Value,
}

impl Tool for PureTool {
    fn name(&self) -> &str {
        self.name
    }

    fn description(&self) -> &str {
        description(self.name)
    }

    fn parameters(&self) -> Value {
        parameters(self.name)
    }

    fn after_call_hint(&self) -> &str {
        after_call_hint(self.name)
    }

    fn idempotent(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let output = ToolOutput::Json((self.run)(&args));
        Box::pin(async move { Ok(output) })
    }
}

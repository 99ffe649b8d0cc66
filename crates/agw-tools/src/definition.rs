//! Tool definitions and the rules for reading one definition file (docs/contract/tools-skills-viewports.md §1–§2).

use serde_json::{Map, Value, json};

/// How a tool is executed, decided by the suffix of the file that defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolKind {
    /// Runs a built-in implementation (`*.backend`, or a built-in without a file).
    Backend,
    /// Waits for the user's answer through `POST /api/ap/submit` (`*.frontend`).
    Frontend,
    /// Performed by the client; the result is always `OK` (`*.action`).
    Action,
}

impl ToolKind {
    /// The call type used in SSE `toolType`, memory snapshots and in-run assistant messages.
    pub fn call_type(self) -> &'static str {
        match self {
            ToolKind::Backend => "function",
            ToolKind::Frontend => "frontend",
            ToolKind::Action => "action",
        }
    }

    /// The kind a definition file name stands for (suffix compared case-insensitively), if any.
    pub fn from_file_name(file_name: &str) -> Option<ToolKind> {
        let lower = file_name.to_ascii_lowercase();
        [(".backend", ToolKind::Backend), (".frontend", ToolKind::Frontend), (".action", ToolKind::Action)]
            .into_iter()
            .find(|(suffix, _)| lower.len() > suffix.len() && lower.ends_with(suffix))
            .map(|(_, kind)| kind)
    }

    fn suffix_len(self) -> usize {
        match self {
            ToolKind::Backend => ".backend".len(),
            ToolKind::Frontend => ".frontend".len(),
            ToolKind::Action => ".action".len(),
        }
    }
}

/// A tool as the model and the modes see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// Trimmed, lower-case.
    pub name: String,
    /// Trimmed; may be empty.
    pub description: String,
    /// Trimmed; may be empty.
    pub after_call_hint: String,
    /// JSON schema object of the arguments; never empty (see [`default_parameters`]).
    pub parameters: Value,
    /// How calls are executed; from the defining file's suffix.
    pub kind: ToolKind,
    /// Surfaced as SSE `tool.start.toolApi`.
    pub tool_api: Option<String>,
    /// Frontend tools only: the viewport that renders the tool (defining file stem, lower-case).
    pub viewport_key: Option<String>,
    /// `citations` (agw extension, issue 35): the tool's results carry records the model may
    /// cite, found where this says.
    pub citations: Option<CitationFields>,
    /// `idempotent` (agw extension, issue 37): running a call twice has the effect of running
    /// it once, so a call that was running when agw stopped runs again when the run is resumed
    /// (the others get a result saying their effect is unknown).
    pub idempotent: bool,
}

/// Where a citable tool's result holds its records and which of their fields mean what
/// (`citations` in a tool definition: `true` for the defaults, or an object naming any of them).
/// Each field is a key of the record or a JSON pointer into it (`/sender/name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CitationFields {
    /// JSON pointer to the records in the result (`""`: the result itself); an array holds one
    /// record per item, an object is one record.
    pub records: String,
    /// The id the model cites (a string or a number).
    pub id: String,
    /// The record's text.
    pub content: String,
    /// Who wrote it.
    pub sender_name: String,
    /// The writer's id.
    pub sender_id: String,
    /// When, epoch milliseconds.
    pub timestamp: String,
    /// The source system's chat id.
    pub chat_id: String,
    /// A link to the record.
    pub url: String,
    /// A title.
    pub title: String,
}

impl Default for CitationFields {
    /// The field names of the design document's message records.
    fn default() -> Self {
        Self {
            records: String::new(),
            id: "messageId".into(),
            content: "content".into(),
            sender_name: "senderName".into(),
            sender_id: "senderId".into(),
            timestamp: "timestamp".into(),
            chat_id: "chatId".into(),
            url: "url".into(),
            title: "title".into(),
        }
    }
}

impl CitationFields {
    /// Reads `citations`: `true`, or an object of field names (others keep their defaults).
    /// `false`, `null` or absent: not citable.
    fn parse(value: Option<&Value>) -> Result<Option<Self>, String> {
        let map = match value {
            None | Some(Value::Null) | Some(Value::Bool(false)) => return Ok(None),
            Some(Value::Bool(true)) => return Ok(Some(Self::default())),
            Some(Value::Object(map)) => map,
            Some(_) => return Err("\"citations\" must be true or an object".to_owned()),
        };
        let mut fields = Self::default();
        for (key, value) in map {
            let slot = match key.as_str() {
                "records" => &mut fields.records,
                "id" => &mut fields.id,
                "content" => &mut fields.content,
                "senderName" => &mut fields.sender_name,
                "senderId" => &mut fields.sender_id,
                "timestamp" => &mut fields.timestamp,
                "chatId" => &mut fields.chat_id,
                "url" => &mut fields.url,
                "title" => &mut fields.title,
                other => return Err(format!("\"citations.{other}\" is not supported")),
            };
            let Some(text) = value.as_str() else {
                return Err(format!("\"citations.{key}\" must be a string"));
            };
            *slot = text.trim().to_owned();
        }
        if fields.id.is_empty() {
            return Err("\"citations.id\" must name a field".to_owned());
        }
        Ok(Some(fields))
    }

    /// The value of `field` (a key, or a JSON pointer) in `record`.
    pub fn get<'v>(field: &str, record: &'v Value) -> Option<&'v Value> {
        if field.is_empty() {
            return None;
        }
        if field.starts_with('/') { record.pointer(field) } else { record.get(field) }
    }
}

/// The schema used when a definition or an implementation gives none.
pub fn default_parameters() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": true})
}

/// A missing, null, non-object or empty schema becomes the default one (§2).
pub(crate) fn normalize_parameters(parameters: Option<&Value>) -> Value {
    match parameters {
        Some(Value::Object(map)) if !map.is_empty() => Value::Object(map.clone()),
        _ => default_parameters(),
    }
}

/// The definitions read from one file, plus the entries that were skipped and why.
#[derive(Debug, Default)]
pub(crate) struct ParsedFile {
    pub defs: Vec<ToolDef>,
    pub skipped: Vec<String>,
}

/// Why a whole definition file is unusable (its entries may still be skipped one by one: those
/// are load problems, not this). The display text is the reason reported for the file.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionFileError {
    /// The text is not JSON.
    #[error("invalid JSON: {0}")]
    InvalidJson(#[source] serde_json::Error),
    /// The JSON has no `tools` array.
    #[error("no \"tools\" array")]
    NoToolsArray,
}

/// Checks one definition file on its own: `Err` when the whole file is unusable (not JSON, no
/// `tools` array). Files with other suffixes are not definition files and always pass. Used by
/// hot reload to keep serving a file's last good version.
pub fn validate_file(file_name: &str, text: &str) -> Result<(), DefinitionFileError> {
    match ToolKind::from_file_name(file_name) {
        Some(kind) => parse_file(kind, file_name, text).map(|_| ()),
        None => Ok(()),
    }
}

/// The usable definitions of one definition file, for a tool implemented outside this crate that
/// ships its own file (its metadata, as [`crate::ToolRegistry`] would list it). A file that is
/// unusable as a whole, or has a suffix of no kind, gives none ([`validate_file`] says why).
pub fn definitions_in(file_name: &str, text: &str) -> Vec<ToolDef> {
    ToolKind::from_file_name(file_name)
        .and_then(|kind| parse_file(kind, file_name, text).ok())
        .map_or_else(Vec::new, |parsed| parsed.defs)
}

/// Reads one definition file. `Err` means the whole file is unusable (not JSON, no `tools` array).
pub(crate) fn parse_file(kind: ToolKind, file_name: &str, text: &str) -> Result<ParsedFile, DefinitionFileError> {
    let root: Value = serde_json::from_str(text).map_err(DefinitionFileError::InvalidJson)?;
    let Some(entries) = root.get("tools").and_then(Value::as_array) else {
        return Err(DefinitionFileError::NoToolsArray);
    };
    let viewport_key = (kind == ToolKind::Frontend).then(|| viewport_key_of(file_name, kind));
    let mut parsed = ParsedFile::default();
    for (index, entry) in entries.iter().enumerate() {
        match parse_entry(entry, kind, viewport_key.as_deref()) {
            Ok(def) => parsed.defs.push(def),
            Err(reason) => parsed.skipped.push(format!("tools[{index}] skipped: {reason}")),
        }
    }
    Ok(parsed)
}

/// File name without its suffix, trimmed and lower-cased (`confirm_dialog.frontend` → `confirm_dialog`).
fn viewport_key_of(file_name: &str, kind: ToolKind) -> String {
    let stem = file_name.get(..file_name.len().saturating_sub(kind.suffix_len())).unwrap_or_default();
    stem.trim().to_lowercase()
}

fn parse_entry(entry: &Value, kind: ToolKind, viewport_key: Option<&str>) -> Result<ToolDef, String> {
    let Some(entry) = entry.as_object() else {
        return Err("not a JSON object".to_owned());
    };
    if text_field(entry, "type").as_deref() != Some("function") {
        return Err("\"type\" must be \"function\"".to_owned());
    }
    let name = text_field(entry, "name").unwrap_or_default().to_lowercase();
    if name.is_empty() {
        return Err("blank \"name\"".to_owned());
    }
    Ok(ToolDef {
        name,
        description: text_field(entry, "description").unwrap_or_default(),
        after_call_hint: text_field(entry, "afterCallHint").unwrap_or_default(),
        parameters: normalize_parameters(entry.get("parameters")),
        kind,
        tool_api: text_field(entry, "toolApi").filter(|api| !api.is_empty()),
        viewport_key: viewport_key.map(str::to_owned),
        citations: CitationFields::parse(entry.get("citations"))?,
        idempotent: match entry.get("idempotent") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err("\"idempotent\" must be true or false".to_owned()),
        },
    })
}

/// A string field, trimmed. Non-string values are not coerced: a definition with
/// `"description": 42` is a mistake, and an empty description says so less loudly than text would.
fn text_field(entry: &Map<String, Value>, key: &str) -> Option<String> {
    entry.get(key).and_then(Value::as_str).map(|s| s.trim().to_owned())
}

/// The namespace of remote A2A agents' tools in the registry (`a2a__<name>`, agw-a2a).
pub const A2A_NAMESPACE: &str = "a2a__";

/// The tool a remote A2A agent declared as `name` is offered as: `a2a__<name>`, lower-cased,
/// anything but `[a-z0-9_-]` as `_`, at most 64 characters (what providers accept).
pub fn a2a_tool_name(name: &str) -> String {
    let cleaned: String = name
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    let mut tool = format!("{A2A_NAMESPACE}{cleaned}");
    tool.truncate(64);
    tool
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_comes_from_the_suffix_case_insensitively() {
        assert_eq!(ToolKind::from_file_name("a.backend"), Some(ToolKind::Backend));
        assert_eq!(ToolKind::from_file_name("A.FRONTEND"), Some(ToolKind::Frontend));
        assert_eq!(ToolKind::from_file_name("x.Action"), Some(ToolKind::Action));
        assert_eq!(ToolKind::from_file_name("x.html"), None);
        assert_eq!(ToolKind::from_file_name("x.backend.bak"), None);
        assert_eq!(ToolKind::from_file_name(".backend"), None);
    }

    #[test]
    fn entry_fields_follow_the_rules() {
        let text = r#"{"tools":[
            {"type":" function ","name":"  Show_Form ","description":" d ","afterCallHint":" h ",
             "after_call_hint":"ignored","parameters":{},"toolApi":"/api/x","viewportKey":"ignored"},
            {"type":"Function","name":"wrong_type"},
            {"type":"function","name":"  "},
            {"type":"function","name":"with_schema","parameters":{"type":"object","required":["a"]}},
            "not an object"
        ]}"#;
        let parsed = parse_file(ToolKind::Frontend, "My_Form.frontend", text).unwrap();
        assert_eq!(parsed.defs.len(), 2);
        let first = &parsed.defs[0];
        assert_eq!(first.name, "show_form");
        assert_eq!(first.description, "d");
        assert_eq!(first.after_call_hint, "h");
        assert_eq!(first.parameters, default_parameters());
        assert_eq!(first.tool_api.as_deref(), Some("/api/x"));
        assert_eq!(first.viewport_key.as_deref(), Some("my_form"));
        assert_eq!(parsed.defs[1].parameters, json!({"type":"object","required":["a"]}));
        assert_eq!(parsed.skipped.len(), 3);
        assert!(parsed.skipped[0].contains("tools[1]"), "{:?}", parsed.skipped);
    }

    #[test]
    fn definitions_in_gives_the_usable_entries_only() {
        let text = r#"{"tools":[{"type":"function","name":"A","description":" d "},{"type":"nope","name":"b"}]}"#;
        let defs = definitions_in("a.backend", text);
        assert_eq!(defs.len(), 1);
        assert_eq!((defs[0].name.as_str(), defs[0].description.as_str(), defs[0].kind), ("a", "d", ToolKind::Backend));
        assert!(definitions_in("a.backend", "{").is_empty());
        assert!(definitions_in("a.txt", text).is_empty());
    }

    #[test]
    fn citations_are_declared_with_defaults_or_field_names() {
        let text = r#"{"tools":[
            {"type":"function","name":"a","citations":true},
            {"type":"function","name":"b","citations":{"records":"/items","id":"/meta/id","senderName":" from "}},
            {"type":"function","name":"c","citations":false},
            {"type":"function","name":"d","citations":{"sender":"x"}},
            {"type":"function","name":"e","citations":{"id":7}},
            {"type":"function","name":"f","citations":"yes"}
        ]}"#;
        let parsed = parse_file(ToolKind::Backend, "a.backend", text).unwrap();
        assert_eq!(parsed.defs[0].citations, Some(CitationFields::default()));
        let b = parsed.defs[1].citations.clone().unwrap();
        assert_eq!((b.records.as_str(), b.id.as_str(), b.sender_name.as_str()), ("/items", "/meta/id", "from"));
        assert_eq!(b.content, "content", "unnamed fields keep their defaults");
        assert_eq!(parsed.defs[2].citations, None);
        assert_eq!(parsed.defs.len(), 3);
        assert!(parsed.skipped[0].contains("citations.sender"), "{:?}", parsed.skipped);
        assert!(parsed.skipped[1].contains("must be a string"));
        assert!(parsed.skipped[2].contains("true or an object"));
        let record = json!({"meta": {"id": "x"}, "content": "c"});
        assert_eq!(CitationFields::get("/meta/id", &record), Some(&json!("x")));
        assert_eq!(CitationFields::get("content", &record), Some(&json!("c")));
        assert_eq!(CitationFields::get("", &record), None);
    }

    #[test]
    fn a_definition_may_say_its_tool_is_idempotent() {
        let text = r#"{"tools":[
            {"type":"function","name":"a","idempotent":true},
            {"type":"function","name":"b","idempotent":false},
            {"type":"function","name":"c"},
            {"type":"function","name":"d","idempotent":"yes"}
        ]}"#;
        let parsed = parse_file(ToolKind::Backend, "a.backend", text).unwrap();
        let idempotent: Vec<bool> = parsed.defs.iter().map(|d| d.idempotent).collect();
        assert_eq!(idempotent, [true, false, false]);
        assert!(parsed.skipped[0].contains("\"idempotent\" must be true or false"), "{:?}", parsed.skipped);
    }

    #[test]
    fn non_frontend_tools_have_no_viewport_key() {
        let parsed = parse_file(ToolKind::Backend, "a.backend", r#"{"tools":[{"type":"function","name":"a"}]}"#);
        assert_eq!(parsed.unwrap().defs[0].viewport_key, None);
    }

    #[test]
    fn whole_file_failures() {
        assert!(parse_file(ToolKind::Action, "a.action", "{").unwrap_err().to_string().starts_with("invalid JSON"));
        let no_tools = |text| parse_file(ToolKind::Action, "a.action", text).unwrap_err().to_string();
        assert_eq!(no_tools(r#"{"tools":{}}"#), "no \"tools\" array");
        assert_eq!(no_tools("[]"), "no \"tools\" array");
    }

    #[test]
    fn result_call_types() {
        assert_eq!(ToolKind::Backend.call_type(), "function");
        assert_eq!(ToolKind::Frontend.call_type(), "frontend");
        assert_eq!(ToolKind::Action.call_type(), "action");
    }
}

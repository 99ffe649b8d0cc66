//! What a query carries only to hand it back: the attachments the client refers to
//! ([`Reference`]) and the page the user is on ([`Scene`]). Both are echoed in `request.query`,
//! stored in the history's query line and replayed, and never sent to the model
//! (`docs/contract/http-api.md` §5). The request body ([`crate::request::QueryRequest`]) and the
//! event ([`crate::event::RequestQuery`]) share them.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// One item of `references`. Serialised with all eight keys, absent ones as `null` (that is how
/// `request.query`, the history file and the chat detail render references).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reference {
    /// Client-chosen id; the chat detail de-duplicates references by it and drops those
    /// without one.
    #[serde(default)]
    pub id: Option<String>,
    /// The reference's `type` on the wire (client-defined, e.g. `url`, `file`).
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Display name.
    #[serde(default)]
    pub name: Option<String>,
    /// MIME type of the referenced content.
    #[serde(default)]
    pub mime_type: Option<String>,
    /// Size of the referenced content in bytes.
    #[serde(default)]
    pub size_bytes: Option<i64>,
    /// Where the content lives.
    #[serde(default)]
    pub url: Option<String>,
    /// Hex SHA-256 of the content.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Free-form client metadata.
    #[serde(default)]
    pub meta: Option<Map<String, Value>>,
}

/// The `scene` object `{url, title}`; unknown keys are dropped. Serialised with both keys
/// (absent ones as `null`), like the reference's mapper and the history file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scene {
    /// Address of the page the user is on.
    #[serde(default)]
    pub url: Option<String>,
    /// Title of that page.
    #[serde(default)]
    pub title: Option<String>,
}

/// Accepts `scene` as an object (agw, history files) or as a JSON string holding the object
/// (the reference's live `request.query`). `null` → `None`.
pub(crate) fn deserialize_lenient_scene<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Scene>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum SceneRepr {
        Object(Scene),
        Encoded(String),
    }
    match Option::<SceneRepr>::deserialize(d)? {
        None => Ok(None),
        Some(SceneRepr::Object(scene)) => Ok(Some(scene)),
        Some(SceneRepr::Encoded(text)) => serde_json::from_str(&text).map(Some).map_err(serde::de::Error::custom),
    }
}

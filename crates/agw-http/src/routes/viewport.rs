//! `GET /api/ap/viewport?viewportKey=` (`docs/contract/http-api.md` §7, with every viewport type of
//! the design document served).

use std::collections::HashMap;

use serde_json::{Value, json};

use agw_tools::viewport::ViewportPayload;

use super::HandlerResult;
use crate::envelope::{ApiError, success};
use crate::state::AppState;

pub fn get(state: &AppState, params: &HashMap<String, String>) -> HandlerResult {
    let raw = params.get("viewportKey").ok_or_else(|| ApiError::bad_request("viewportKey is required"))?;
    if raw.trim().is_empty() {
        return Err(ApiError::bad_request("viewportKey is required"));
    }
    let viewports = state.catalogs().viewports.load();
    let viewport = viewports.get(raw).ok_or_else(|| ApiError::not_found(format!("Viewport not found: {raw}")))?;
    let data: Value = match &viewport.payload {
        // Text viewports (`html`, `custom`) are wrapped under their type name; JSON ones are
        // returned as parsed.
        ViewportPayload::Text(text) => json!({ viewport.viewport_type_str(): text }),
        ViewportPayload::Json(value) => value.clone(),
    };
    Ok(success(&data))
}

//! Images and files in each protocol's own shape, as the native request's `references`
//! (docs/models.md "Images and files"): one path checks them all (`agw_protocol::attachment`),
//! and they are echoed, stored and replayed like any reference.

use agw_protocol::Reference;
use serde_json::Value;

/// A reference carrying `data` (base64) of `media_type`, as a `data:` URL.
fn inline(media_type: &str, data: &str, name: Option<&str>) -> Reference {
    Reference {
        kind: Some("file".into()),
        name: name.map(str::to_owned),
        mime_type: Some(media_type.to_owned()),
        url: Some(agw_protocol::attachment::data_url(media_type, data)),
        ..Reference::default()
    }
}

/// A reference to `url` (a `data:` URL or an address) of `media_type`.
fn linked(media_type: Option<&str>, url: &str, name: Option<&str>) -> Reference {
    Reference {
        kind: Some("file".into()),
        name: name.map(str::to_owned),
        mime_type: media_type.map(str::to_owned),
        url: Some(url.to_owned()),
        ..Reference::default()
    }
}

/// The AI SDK's file parts of a UIMessage: `{type: "file", mediaType, url, filename?}` (`url`
/// a `data:` URL or an address).
pub(super) fn ai_sdk(message: &Value) -> Vec<Reference> {
    parts(&message["parts"])
        .filter(|p| p["type"] == "file")
        .filter_map(|p| Some(linked(p["mediaType"].as_str(), p["url"].as_str()?, p["filename"].as_str())))
        .collect()
}

/// AG-UI's media parts of a user message's `content`: 1.0's `{type: "image" | "document",
/// source: {type: "data" | "url", value, mimeType}}` (`data` base64), and the `{type: "binary",
/// mimeType, data?, url?, filename?}` of clients before 1.0.
pub(super) fn ag_ui(message: &Value) -> Vec<Reference> {
    parts(&message["content"])
        .filter_map(|p| match p["type"].as_str()? {
            "image" | "document" => {
                let source = &p["source"];
                let (media_type, value) = (source["mimeType"].as_str(), source["value"].as_str()?);
                match source["type"].as_str()? {
                    "data" => Some(inline(media_type?, value, None)),
                    "url" => Some(linked(media_type, value, None)),
                    _ => None,
                }
            }
            "binary" => {
                let media_type = p["mimeType"].as_str()?;
                let name = p["filename"].as_str();
                match (p["data"].as_str(), p["url"].as_str()) {
                    (Some(data), _) => Some(inline(media_type, data, name)),
                    (None, Some(url)) => Some(linked(Some(media_type), url, name)),
                    (None, None) => None,
                }
            }
            _ => None,
        })
        .collect()
}

/// OpenAI's content parts of a user message: `{type: "image_url", image_url: {url}}` and `{type:
/// "file", file: {file_data, filename?}}` (`file_data` a `data:` URL). An image by URL is taken
/// as JPEG unless its data URL says otherwise.
pub(super) fn openai(message: &Value) -> Vec<Reference> {
    parts(&message["content"])
        .filter_map(|p| match p["type"].as_str()? {
            "image_url" => {
                let url = p["image_url"]["url"].as_str()?;
                Some(linked(Some(image_type_of(url)), url, None))
            }
            "file" => Some(linked(None, p["file"]["file_data"].as_str()?, p["file"]["filename"].as_str())),
            _ => None,
        })
        .collect()
}

/// An image URL's type from its extension (`data:` URLs carry their own).
fn image_type_of(url: &str) -> &'static str {
    let path = url.split(['?', '#']).next().unwrap_or(url).to_ascii_lowercase();
    match path.rsplit('.').next() {
        Some("png") => "image/png",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        _ => "image/jpeg",
    }
}

/// A2A 1.0 file parts: `{raw, mediaType, filename?}` (`raw` base64) or `{url, mediaType,
/// filename?}`; `None` for another kind of part.
pub(super) fn a2a(part: &Value) -> Option<Reference> {
    let media_type = part["mediaType"].as_str();
    let name = part["filename"].as_str();
    match (part["raw"].as_str(), part["url"].as_str()) {
        (Some(raw), _) => Some(inline(media_type.unwrap_or("application/octet-stream"), raw, name)),
        (None, Some(url)) => Some(linked(media_type, url, name)),
        (None, None) => None,
    }
}

fn parts(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_protocols_file_part_becomes_a_reference() {
        let ai = ai_sdk(&json!({"parts": [{"type": "text", "text": "hi"},
            {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AAAA", "filename": "a.png"}]}));
        assert_eq!(ai.len(), 1);
        assert_eq!((ai[0].url.as_deref(), ai[0].name.as_deref()), (Some("data:image/png;base64,AAAA"), Some("a.png")));

        let ag = ag_ui(&json!({"content": [{"type": "binary", "mimeType": "application/pdf", "data": "JVBERi0="}]}));
        assert_eq!(ag[0].url.as_deref(), Some("data:application/pdf;base64,JVBERi0="));
        let ag = ag_ui(&json!({"content": [{"type": "text", "text": "x"},
            {"type": "image", "source": {"type": "data", "value": "AAAA", "mimeType": "image/png"}},
            {"type": "document", "source": {"type": "url", "value": "https://example.com/r.pdf", "mimeType": "application/pdf"}}]}));
        assert_eq!(ag[0].url.as_deref(), Some("data:image/png;base64,AAAA"));
        assert_eq!(
            (ag[1].url.as_deref(), ag[1].mime_type.as_deref()),
            (Some("https://example.com/r.pdf"), Some("application/pdf"))
        );

        let oa = openai(&json!({"content": [{"type": "text", "text": "x"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.PNG?x=1"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "r.pdf"}}]}));
        assert_eq!(oa.len(), 2);
        assert_eq!(oa[0].mime_type.as_deref(), Some("image/png"));
        assert_eq!(oa[1].name.as_deref(), Some("r.pdf"));

        let a = a2a(&json!({"raw": "aGk=", "mediaType": "text/plain", "filename": "n.txt"})).unwrap();
        assert_eq!(a.url.as_deref(), Some("data:text/plain;base64,aGk="));
        assert!(a2a(&json!({"text": "hi"})).is_none());
    }
}

//! Images and files sent with a query (docs/models.md "Images and files"). A reference that
//! carries its content as a `data:` URL, or an image at an `https` URL, becomes an
//! [`Attachment`] of the user's turn — checked here: its type, its size, and that its bytes are
//! what its type says. Other references stay what the contract makes them: echoed and stored,
//! never sent to the model. Every protocol's file parts arrive here as references.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::chat::{Attachment, AttachmentKind, AttachmentSource};
use crate::echoed::Reference;

/// Most attachments one message may carry.
pub const MAX_ATTACHMENTS: usize = 20;
/// Largest image, decoded (Anthropic's limit).
pub const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;
/// Largest PDF, decoded.
pub const MAX_PDF_BYTES: usize = 32 * 1024 * 1024;
/// Largest text file, decoded.
pub const MAX_TEXT_BYTES: usize = 1024 * 1024;

/// The image types both providers read.
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Why a query's attachment is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachmentError {
    /// More than [`MAX_ATTACHMENTS`].
    #[error("at most {MAX_ATTACHMENTS} images and files per message, not {0}")]
    TooMany(usize),
    /// One of them is not usable; `index` is its place among the references.
    #[error("references[{index}] ({name}): {reason}")]
    Invalid {
        /// Its place in `references`.
        index: usize,
        /// Its name, or `unnamed`.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// The attachments among `references`, in order.
///
/// # Errors
/// The first reference that should be an attachment but is not usable, or too many.
pub fn from_references(references: &[Reference]) -> Result<Vec<Attachment>, AttachmentError> {
    let mut out = Vec::new();
    for (index, reference) in references.iter().enumerate() {
        let invalid = |reason: String| AttachmentError::Invalid {
            index,
            name: reference.name.clone().unwrap_or_else(|| "unnamed".into()),
            reason,
        };
        if let Some(attachment) = from_reference(reference).map_err(invalid)? {
            out.push(attachment);
        }
    }
    if out.len() > MAX_ATTACHMENTS {
        return Err(AttachmentError::TooMany(out.len()));
    }
    Ok(out)
}

/// One reference as an attachment: `None` when it carries nothing to send (no `data:` URL, no
/// image at an `https` URL).
fn from_reference(reference: &Reference) -> Result<Option<Attachment>, String> {
    let Some(url) = reference.url.as_deref().map(str::trim) else { return Ok(None) };
    let declared = reference.mime_type.as_deref().map(|m| m.trim().to_ascii_lowercase()).filter(|m| !m.is_empty());
    let name = reference.name.clone().filter(|n| !n.trim().is_empty());
    if let Some(rest) = strip_prefix_ignore_case(url, "data:") {
        let (media_type, data) = parse_data_url(rest)?;
        let media_type = media_type.or(declared).ok_or("a data: URL without a media type")?;
        let bytes = STANDARD.decode(data.trim()).map_err(|e| format!("the data is not valid base64 ({e})"))?;
        let source = checked(&media_type, &bytes)?;
        return Ok(Some(Attachment { media_type, name, source }));
    }
    if strip_prefix_ignore_case(url, "https://").is_some() {
        return Ok(match declared {
            Some(media_type) if IMAGE_TYPES.contains(&media_type.as_str()) => {
                Some(Attachment { media_type, name, source: AttachmentSource::Url(url.to_owned()) })
            }
            // Only images go by URL: not every provider fetches documents.
            _ => None,
        });
    }
    Ok(None)
}

/// `[<media type>][;params][;base64],<data>` → the media type (lower-case, without
/// parameters) and the base64 text.
fn parse_data_url(rest: &str) -> Result<(Option<String>, &str), String> {
    let (head, data) = rest.split_once(',').ok_or("a data: URL without a comma")?;
    let mut parts = head.split(';');
    let media_type = parts.next().map(|m| m.trim().to_ascii_lowercase()).filter(|m| !m.is_empty());
    if !parts.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
        return Err("a data: URL must be base64 (`;base64,`)".into());
    }
    Ok((media_type, data))
}

/// The source of `bytes` of `media_type`, once they are what it says and small enough.
fn checked(media_type: &str, bytes: &[u8]) -> Result<AttachmentSource, String> {
    let too_big = |limit: usize| format!("{} bytes; at most {limit} are allowed for {media_type}", bytes.len());
    match AttachmentKind::of(media_type) {
        AttachmentKind::Image => {
            if !IMAGE_TYPES.contains(&media_type) {
                return Err(format!("{media_type} is not supported; images may be {}", IMAGE_TYPES.join(", ")));
            }
            if bytes.len() > MAX_IMAGE_BYTES {
                return Err(too_big(MAX_IMAGE_BYTES));
            }
            if sniff(bytes) != Some(media_type) {
                return Err(format!("the bytes are not {media_type}"));
            }
            Ok(AttachmentSource::Base64(STANDARD.encode(bytes)))
        }
        AttachmentKind::Pdf => {
            if bytes.len() > MAX_PDF_BYTES {
                return Err(too_big(MAX_PDF_BYTES));
            }
            if sniff(bytes) != Some("application/pdf") {
                return Err("the data is not a PDF".into());
            }
            Ok(AttachmentSource::Base64(STANDARD.encode(bytes)))
        }
        AttachmentKind::Text => {
            if !(media_type.starts_with("text/") || media_type == "application/json") {
                return Err(format!(
                    "{media_type} is not supported; files may be images ({}), application/pdf, text/* or \
                     application/json",
                    IMAGE_TYPES.join(", ")
                ));
            }
            if bytes.len() > MAX_TEXT_BYTES {
                return Err(too_big(MAX_TEXT_BYTES));
            }
            let text = std::str::from_utf8(bytes).map_err(|_| "the text is not UTF-8".to_owned())?;
            Ok(AttachmentSource::Text(text.to_owned()))
        }
    }
}

/// The type the first bytes say, for the types that have a signature.
fn sniff(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0x89, b'P', b'N', b'G', ..] => Some("image/png"),
        [0xFF, 0xD8, 0xFF, ..] => Some("image/jpeg"),
        [b'G', b'I', b'F', b'8', ..] => Some("image/gif"),
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Some("image/webp"),
        [b'%', b'P', b'D', b'F', b'-', ..] => Some("application/pdf"),
        _ => None,
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

/// A `data:` URL of `bytes` (how attachments are sent to OpenAI-compatible providers).
pub fn data_url(media_type: &str, base64: &str) -> String {
    format!("data:{media_type};base64,{base64}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest PNG there is: a 1×1 transparent pixel.
    const PNG_1X1: &str =
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

    fn reference(url: &str, mime: Option<&str>) -> Reference {
        Reference {
            name: Some("f".into()),
            url: Some(url.into()),
            mime_type: mime.map(Into::into),
            ..Reference::default()
        }
    }

    #[test]
    fn data_urls_and_https_images_are_attachments_other_references_are_not() {
        let refs = [
            reference(&format!("data:image/png;base64,{PNG_1X1}"), None),
            reference("https://example.com/cat.jpg", Some("image/jpeg")),
            reference("https://example.com/report.pdf", Some("application/pdf")),
            reference("http://example.com/cat.jpg", Some("image/jpeg")),
            Reference::default(),
            reference("data:text/plain;charset=utf-8;base64,aGVsbG8=", None),
        ];
        let got = from_references(&refs).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!((got[0].media_type.as_str(), got[0].kind()), ("image/png", AttachmentKind::Image));
        assert_eq!(got[0].source, AttachmentSource::Base64(PNG_1X1.into()));
        assert_eq!(got[1].source, AttachmentSource::Url("https://example.com/cat.jpg".into()));
        assert_eq!(got[2].source, AttachmentSource::Text("hello".into()));
        assert_eq!(got[2].name.as_deref(), Some("f"));
    }

    #[test]
    fn a_file_that_is_not_what_it_says_or_too_big_is_refused_naming_it() {
        let bad = |url: &str, mime: Option<&str>| from_references(&[reference(url, mime)]).unwrap_err().to_string();
        assert!(bad(&format!("data:image/jpeg;base64,{PNG_1X1}"), None).contains("the bytes are not image/jpeg"));
        assert!(bad("data:image/png;base64,!!!", None).contains("not valid base64"));
        assert!(bad("data:image/bmp;base64,Qk0=", None).contains("image/bmp is not supported"));
        assert!(bad("data:application/zip;base64,UEsDBA==", None).contains("application/zip is not supported"));
        assert!(bad("data:application/pdf;base64,aGVsbG8=", None).contains("not a PDF"));
        assert!(bad("data:text/plain,hello", None).contains("must be base64"));
        assert!(bad("data:;base64,aGVsbG8=", None).contains("without a media type"));
        assert!(bad("data:text/plain;base64,/w==", None).contains("not UTF-8"));
        let big = STANDARD.encode(vec![b'a'; MAX_TEXT_BYTES + 1]);
        let e = bad(&format!("data:text/plain;base64,{big}"), None);
        assert!(e.starts_with("references[0] (f): ") && e.contains("at most 1048576"), "{e}");
        let many: Vec<Reference> =
            (0..=MAX_ATTACHMENTS).map(|_| reference("data:text/plain;base64,aGk=", None)).collect();
        assert_eq!(from_references(&many), Err(AttachmentError::TooMany(MAX_ATTACHMENTS + 1)));
        // The declared type fills in for a data: URL without one; the URL's own wins.
        let ok = from_references(&[reference("data:;base64,aGk=", Some("text/markdown"))]).unwrap();
        assert_eq!(ok[0].media_type, "text/markdown");
    }
}

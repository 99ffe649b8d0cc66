//! Which images and files a provider's models take (docs/models.md "Images and files"), and a
//! request fitted to that: attachments a model cannot read become a line of text saying so.
//! Text files every model takes, as text.

use crate::request::{AttachmentKind, ChatMessage, ChatRequest};

/// The attachment kinds a provider takes besides text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachmentSupport {
    /// Images (`image/png`, `image/jpeg`, `image/gif`, `image/webp`).
    pub image: bool,
    /// PDF documents.
    pub pdf: bool,
}

impl AttachmentSupport {
    /// Images and PDFs: what configured providers take unless their setting says otherwise.
    pub const ALL: Self = Self { image: true, pdf: true };
    /// Text only: providers registered in code (the demo model, an embedder's own).
    pub const TEXT: Self = Self { image: false, pdf: false };

    /// Whether `kind` is taken.
    pub fn takes(self, kind: AttachmentKind) -> bool {
        match kind {
            AttachmentKind::Image => self.image,
            AttachmentKind::Pdf => self.pdf,
            AttachmentKind::Text => true,
        }
    }
}

impl std::str::FromStr for AttachmentSupport {
    type Err = String;

    /// `none`, or a comma-separated list of `image` and `pdf` (`image,pdf`).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut support = Self::TEXT;
        if s.trim() == "none" {
            return Ok(support);
        }
        for kind in s.split(',').map(str::trim) {
            match kind {
                "image" => support.image = true,
                "pdf" => support.pdf = true,
                other => return Err(format!("{other:?} is not an attachment kind (image, pdf, or none)")),
            }
        }
        Ok(support)
    }
}

/// Whether any message of `request` carries an attachment: most requests have none, and need no
/// look-up of what their provider takes.
pub fn any(request: &ChatRequest) -> bool {
    request.messages.iter().any(|m| matches!(m, ChatMessage::User { attachments, .. } if !attachments.is_empty()))
}

/// `request` with every attachment `support` does not take replaced by a line in its message's
/// text: `[image cat.png not shown: this model does not take images]`. Untouched (no copy)
/// when nothing needs replacing.
pub fn fit(mut request: ChatRequest, support: AttachmentSupport) -> ChatRequest {
    for message in &mut request.messages {
        let ChatMessage::User { content, attachments } = message else { continue };
        if attachments.iter().all(|a| support.takes(a.kind())) {
            continue;
        }
        let mut notes = Vec::new();
        attachments.retain(|a| {
            let kind = a.kind();
            if support.takes(kind) {
                return true;
            }
            let name = a.name.as_deref().map(|n| format!(" {n}")).unwrap_or_default();
            notes.push(format!("[{}{name} not shown: this model does not take {}s]", kind.as_str(), kind.as_str()));
            false
        });
        let note = notes.join("\n");
        *content = if content.is_empty() { note } else { format!("{note}\n\n{content}") };
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Attachment, AttachmentSource};

    fn attachment(media_type: &str, name: Option<&str>) -> Attachment {
        Attachment {
            media_type: media_type.into(),
            name: name.map(Into::into),
            source: AttachmentSource::Base64("AAAA".into()),
        }
    }

    #[test]
    fn what_a_model_cannot_take_becomes_a_note_and_the_rest_stays() {
        let request = ChatRequest {
            provider_key: "p".into(),
            model: "m".into(),
            messages: vec![ChatMessage::User {
                content: "What is this?".into(),
                attachments: vec![attachment("image/png", Some("cat.png")), attachment("application/pdf", None)],
            }],
            ..ChatRequest::default()
        };
        assert!(any(&request));
        assert!(!any(&ChatRequest { messages: vec![ChatMessage::user("hi")], ..ChatRequest::default() }));
        assert_eq!(fit(request.clone(), AttachmentSupport::ALL), request);
        let ChatMessage::User { content, attachments } =
            &fit(request, AttachmentSupport { image: false, pdf: true }).messages[0]
        else {
            panic!("user")
        };
        assert_eq!(content, "[image cat.png not shown: this model does not take images]\n\nWhat is this?");
        assert_eq!(attachments.len(), 1);
        assert_eq!(attachments[0].media_type, "application/pdf");
    }

    #[test]
    fn the_setting_lists_kinds_or_says_none() {
        assert_eq!("image, pdf".parse(), Ok(AttachmentSupport::ALL));
        assert_eq!("none".parse(), Ok(AttachmentSupport::TEXT));
        assert_eq!("image".parse(), Ok(AttachmentSupport { image: true, pdf: false }));
        assert!("audio".parse::<AttachmentSupport>().unwrap_err().contains("audio"));
    }
}

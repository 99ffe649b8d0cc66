//! History lines encoded once for an append: one buffer of whole `\n`-terminated lines that the
//! file backend writes as it is and PostgreSQL reads line by line. A run's step can carry a
//! model turn's whole text; encoding it straight into the write buffer keeps one serialized copy
//! of it instead of a string per line, a joined payload and a write buffer.

use agw_protocol::history::HistoryLine;

/// Lines encoded back to back, each followed by `\n`, after one reserved byte.
pub(crate) struct EncodedLines {
    /// `\n`, then the lines. The first byte is the separator a torn last line of the file needs
    /// before the append ([`Self::after_separator`]); it is not part of the payload.
    buf: String,
}

impl EncodedLines {
    /// Encodes `lines` (serde_json writes valid UTF-8 only).
    pub(crate) fn encode(lines: &[HistoryLine]) -> Result<Self, serde_json::Error> {
        let mut buf = Vec::with_capacity(512);
        buf.push(b'\n');
        for line in lines {
            serde_json::to_writer(&mut buf, line)?;
            buf.push(b'\n');
        }
        let buf = String::from_utf8(buf).map_err(|e| serde_json::Error::io(std::io::Error::other(e)))?;
        Ok(Self { buf })
    }

    /// Lines already encoded (no `\n` in them), as the index, the migration and a fork hold them.
    pub(crate) fn from_texts<S: AsRef<str>>(texts: &[S]) -> Self {
        let mut buf = String::from("\n");
        for text in texts {
            buf.push_str(text.as_ref());
            buf.push('\n');
        }
        Self { buf }
    }

    /// The lines, each ending in `\n`.
    pub(crate) fn payload(&self) -> &[u8] {
        &self.buf.as_bytes()[1..]
    }

    /// `\n`, then the lines: what to append to a file whose last line is torn.
    pub(crate) fn after_separator(&self) -> &[u8] {
        self.buf.as_bytes()
    }

    /// Each line, without its `\n` (JSON text never holds a raw line break: serde_json escapes
    /// them in strings).
    #[cfg(any(test, feature = "postgres"))]
    pub(crate) fn texts(&self) -> Vec<&str> {
        let lines = &self.buf[1..];
        lines.strip_suffix('\n').map_or_else(Vec::new, |lines| lines.split('\n').collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_whole_and_the_separator_is_only_there_when_asked() {
        let lines = EncodedLines::from_texts(&["{\"a\":1}", "{\"b\":\"x\"}"]);
        assert_eq!(lines.payload(), b"{\"a\":1}\n{\"b\":\"x\"}\n");
        assert_eq!(lines.after_separator(), b"\n{\"a\":1}\n{\"b\":\"x\"}\n");
        assert_eq!(lines.texts(), ["{\"a\":1}", "{\"b\":\"x\"}"]);
        assert!(EncodedLines::from_texts::<&str>(&[]).payload().is_empty());
        assert!(EncodedLines::encode(&[]).unwrap().texts().is_empty());
    }
}

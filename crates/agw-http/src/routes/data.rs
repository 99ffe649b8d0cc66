//! `GET /api/ap/data/{filename}`: static files from one flat directory (`docs/contract/http-api.md` §8).
//!
//! The filename is one path segment: `..`, `/` and `\` are refused before touching the disk, and
//! the file is opened without following a symlink and then checked (what was opened, not what the
//! path pointed to a moment earlier), so nothing outside the directory can be served. Bodies and
//! ranges are streamed from the file in 64 KiB chunks, never read into memory whole.

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};

use super::HandlerResult;
use crate::body::BoxBody;
use crate::envelope::ApiError;

/// MIME type by extension (case-insensitive): the contract's table first, then common types.
pub fn content_type(filename: &str) -> &'static str {
    let ext = filename.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "svg" => "image/svg+xml",
        "webp" => "image/webp",
        "avif" => "image/avif",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "xls" => "application/vnd.ms-excel",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "doc" => "application/msword",
        "pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "ppt" => "application/vnd.ms-powerpoint",
        "csv" => "text/csv",
        "json" => "application/json",
        "md" => "text/markdown",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "png" => "image/png",
        "jpg" | "jpeg" | "jpe" => "image/jpeg",
        "gif" => "image/gif",
        "bmp" => "image/bmp",
        "tif" | "tiff" => "image/tiff",
        "pdf" => "application/pdf",
        "txt" => "text/plain",
        "html" | "htm" => "text/html",
        "xml" => "application/xml",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "js" => "text/javascript",
        "css" => "text/css",
        "mov" => "video/quicktime",
        _ => "application/octet-stream",
    }
}

/// `application/x-www-form-urlencoded` UTF-8 encoding with `+` written as `%20`
/// (alphanumerics and `.-*_` stay literal).
pub fn encode_filename(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'*' | b'_') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Parses `bytes=a-b` / `bytes=a-` / `bytes=-n` for a body of `len` bytes (single ranges only).
fn parse_range(value: &str, len: u64) -> Option<(u64, u64)> {
    let spec = value.trim().strip_prefix("bytes=")?;
    if spec.contains(',') || len == 0 {
        return None;
    }
    let (start, end) = spec.split_once('-')?;
    let (start, end) = match (start.trim(), end.trim()) {
        ("", suffix) => {
            let n: u64 = suffix.parse().ok()?;
            (len.saturating_sub(n), len - 1)
        }
        (s, "") => (s.parse().ok()?, len - 1),
        (s, e) => (s.parse().ok()?, e.parse::<u64>().ok()?.min(len - 1)),
    };
    (start <= end && start < len).then_some((start, end))
}

pub async fn serve(dir: &Path, raw_name: &str, params: &HashMap<String, String>, range: Option<&str>) -> HandlerResult {
    let invalid = || ApiError::bad_request("Invalid filename");
    let name = percent_decode(raw_name).ok_or_else(invalid)?;
    if name.is_empty() || name.contains("..") || name.contains('/') || name.contains('\\') || name.contains('\0') {
        return Err(invalid());
    }
    let path = dir.join(&name);
    if path.parent() != Some(dir) {
        return Err(invalid());
    }
    let not_found = || ApiError::not_found("File not found");
    // Open first, then look at what was opened: a check of the path followed by an open of the
    // path could be defeated by swapping a symlink in between. The name is one path component,
    // so O_NOFOLLOW on it refuses every symlink; O_NONBLOCK keeps a FIFO from blocking the open.
    let file = match open_no_follow(&path).await {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_found()),
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "data file not opened");
            return Err(not_found());
        }
    };
    let meta = file.metadata().await.map_err(|_| not_found())?;
    if !meta.file_type().is_file() {
        return Err(not_found());
    }
    let ctype = content_type(&name);
    let download = params.get("download").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let disposition = if ctype.starts_with("image/") && !download { "inline" } else { "attachment" };
    let len = meta.len();
    let (status, start, count, content_range) = match range.and_then(|r| parse_range(r, len)) {
        Some((start, end)) => {
            (StatusCode::PARTIAL_CONTENT, start, end - start + 1, Some(format!("bytes {start}-{end}/{len}")))
        }
        None => (StatusCode::OK, 0, len, None),
    };
    let mut file = file;
    if start > 0 {
        use tokio::io::AsyncSeekExt;
        file.seek(std::io::SeekFrom::Start(start)).await.map_err(|e| {
            tracing::warn!(path = %path.display(), error = %e, "data file seek failed");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Failed to read file")
        })?;
    }
    let mut resp = Response::new(file_body(file, count));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    if let Ok(v) = HeaderValue::from_str(&format!("{disposition}; filename*=UTF-8''{}", encode_filename(&name))) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(count));
    if let Some(cr) = content_range.and_then(|v| HeaderValue::from_str(&v).ok()) {
        h.insert(header::CONTENT_RANGE, cr);
    }
    Ok(resp)
}

/// Opens `path` for reading without following a symlink in its last component.
async fn open_no_follow(path: &Path) -> std::io::Result<tokio::fs::File> {
    let mut options = tokio::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    options.open(path).await
}

/// Bytes read per body frame: large enough for throughput, small enough that a 1 GiB range never
/// sits in memory (the socket's backpressure paces the reads).
const FILE_CHUNK: usize = 64 * 1024;

/// The next `count` bytes of `file`, read chunk by chunk as hyper asks for them. A read error
/// mid-way ends the body early (logged); hyper then closes the connection because the body is
/// shorter than its `Content-Length`.
fn file_body(file: tokio::fs::File, count: u64) -> BoxBody {
    use futures::StreamExt;
    use tokio::io::AsyncReadExt;

    let chunks = futures::stream::unfold((file, count), |(mut file, left)| async move {
        if left == 0 {
            return None;
        }
        let want = usize::try_from(left).unwrap_or(usize::MAX).min(FILE_CHUNK);
        let mut buf = vec![0u8; want];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Frame::data(Bytes::from(buf))), (file, left - n as u64)))
            }
            Err(e) => {
                tracing::warn!(error = %e, "data file read failed mid-body");
                None
            }
        }
    });
    StreamBody::new(chunks.boxed()).boxed_unsync()
}

/// Decodes `%XX` escapes of a path segment; `None` for invalid escapes or non-UTF-8 results.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filename_encoding_matches_the_contract() {
        assert_eq!(encode_filename("a b(c).png"), "a%20b%28c%29.png");
        assert_eq!(encode_filename("报告.pdf"), "%E6%8A%A5%E5%91%8A.pdf");
        assert_eq!(encode_filename("x-y_z*.csv"), "x-y_z*.csv");
    }

    #[test]
    fn content_types() {
        assert_eq!(content_type("A.PNG"), "image/png");
        assert_eq!(content_type("r.pdf"), "application/pdf");
        assert_eq!(content_type("d.csv"), "text/csv");
        assert_eq!(content_type("noext"), "application/octet-stream");
    }

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-3", 10), Some((0, 3)));
        assert_eq!(parse_range("bytes=7-", 10), Some((7, 9)));
        assert_eq!(parse_range("bytes=-4", 10), Some((6, 9)));
        assert_eq!(parse_range("bytes=5-100", 10), Some((5, 9)));
        assert_eq!(parse_range("bytes=10-12", 10), None);
        assert_eq!(parse_range("bytes=0-1,3-4", 10), None);
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("..%2Fapplication.yml").as_deref(), Some("../application.yml"));
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("a%20b"), Some("a b".into()));
    }
}

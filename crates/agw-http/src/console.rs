//! The browser console (docs/console.md): four static files compiled into the binary and served
//! at `/console/` (`/` and `/console` redirect there). The page uses agw's HTTP API like any
//! client, so serving it needs no token: it asks for one and sends it with its API calls. A
//! Content-Security-Policy lets it load and call nothing but agw's own origin.

use http::{HeaderValue, Response, StatusCode, header};

use crate::body::{BoxBody, full};

const INDEX: &str = include_str!("../console/index.html");
const SCRIPT: &str = include_str!("../console/console.js");
const STYLE: &str = include_str!("../console/console.css");
const FRAME: &str = include_str!("../console/frame.html");

/// Scripts, styles and API calls from agw's own origin only; no inline script or style, no
/// framing of the console, no form posts elsewhere. Images may come from `https:` and `data:`
/// (an answer's Markdown images; they run no code). Frames: the viewport host only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data: https:; connect-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// The viewport host's: a viewport is HTML with inline script and style, so those run — in an
/// iframe sandboxed without `allow-same-origin` (an opaque origin), with no network at all and
/// framed by the console only.
pub const FRAME_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
     img-src data: https:; font-src data:; form-action 'none'; base-uri 'none'; frame-ancestors 'self'";

/// Where the console lives.
pub const PATH: &str = "/console/";

/// What a console path is.
enum Asset {
    /// `/` and `/console` lead to [`PATH`].
    Redirect,
    /// A file: its body, content type and policy.
    File(&'static str, &'static str, &'static str),
}

/// The one table of the console's paths.
fn asset(path: &str) -> Option<Asset> {
    const HTML: &str = "text/html; charset=utf-8";
    Some(match path {
        "/" | "/console" => Asset::Redirect,
        "/console/" | "/console/index.html" => Asset::File(INDEX, HTML, CONTENT_SECURITY_POLICY),
        "/console/console.js" => Asset::File(SCRIPT, "text/javascript; charset=utf-8", CONTENT_SECURITY_POLICY),
        "/console/console.css" => Asset::File(STYLE, "text/css; charset=utf-8", CONTENT_SECURITY_POLICY),
        "/console/frame.html" => Asset::File(FRAME, HTML, FRAME_POLICY),
        _ => return None,
    })
}

/// Whether `path` is one of the console's (the router sends its `GET`s to [`serve`]).
pub(crate) fn is_console_path(path: &str) -> bool {
    asset(path).is_some()
}

/// The console's answer to a `GET` of `path`; `None` for any other path.
pub(crate) fn serve(path: &str) -> Option<Response<BoxBody>> {
    let (body, content_type, policy) = match asset(path)? {
        Asset::Redirect => {
            let mut resp = Response::new(full(""));
            *resp.status_mut() = StatusCode::FOUND;
            resp.headers_mut().insert(header::LOCATION, HeaderValue::from_static(PATH));
            return Some(resp);
        }
        Asset::File(body, content_type, policy) => (body, content_type, policy),
    };
    let mut resp = Response::new(full(body));
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(policy));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    // A new binary may bring a new console: the browser asks again each time.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Some(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_files_and_no_inline_code() {
        // The policy forbids inline scripts and styles: the page must not need them.
        assert!(!INDEX.contains("<script>") && !INDEX.contains("style="), "no inline script or style");
        assert!(INDEX.contains(r#"<script type="module" src="console.js"></script>"#));
        assert!(INDEX.contains(r#"href="console.css""#));
        // Only agw's own API, relative paths: no other origin is ever called.
        for url in ["https://", "http://"] {
            assert!(!SCRIPT.contains(&format!("fetch(\"{url}")), "{url}");
        }
        assert!(
            !SCRIPT.contains("innerHTML = event") && !SCRIPT.contains("eval("),
            "text is escaped before it is HTML"
        );
    }

    #[test]
    fn each_file_has_its_type_and_the_policy() {
        let page = serve("/console/").unwrap();
        assert_eq!(page.headers()[header::CONTENT_TYPE], "text/html; charset=utf-8");
        assert_eq!(page.headers()[header::CONTENT_SECURITY_POLICY], CONTENT_SECURITY_POLICY);
        assert_eq!(
            serve("/console/console.js").unwrap().headers()[header::CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
        let root = serve("/").unwrap();
        assert_eq!(
            (root.status(), &root.headers()[header::LOCATION]),
            (StatusCode::FOUND, &HeaderValue::from_static(PATH))
        );
        assert!(serve("/console/other.js").is_none());
        let frame = serve("/console/frame.html").unwrap();
        assert_eq!(frame.headers()[header::CONTENT_SECURITY_POLICY], FRAME_POLICY);
        assert!(!FRAME_POLICY.contains("connect-src") && FRAME_POLICY.contains("default-src 'none'"), "no network");
    }
}

//! The accept loop: hyper HTTP/1.1 on a tokio listener, with the door's limits — a header-read
//! timeout (slowloris, idle keep-alive), a cap on open connections in total and per client IP,
//! and a per-IP request rate (see [`crate::limits`]).

use std::future::Future;
use std::net::SocketAddr;

use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::envelope::json_response;
use crate::limits::{ClientLimits, Refusal};
use crate::routes;
use crate::state::AppState;

/// A bound server, ready to accept.
pub struct Server {
    listener: TcpListener,
    state: AppState,
}

impl Server {
    /// Binds to the configured address and port (port 0 picks a free one).
    pub async fn bind(state: AppState) -> std::io::Result<Self> {
        let addr = SocketAddr::new(state.settings.server.address, state.settings.server.port);
        let listener = TcpListener::bind(addr).await?;
        Ok(Self { listener, state })
    }

    /// The bound address (the real port when port 0 was configured).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves; then stops accepting. In-flight streams keep running
    /// in their own tasks. Only accepts: [`crate::Gateway`] starts what requests need first.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let Server { listener, state } = self;
        let limits = state.settings.server.limits;
        let clients = ClientLimits::new(limits);
        let mut builder = auto::Builder::new(TokioExecutor::new());
        // The timer makes hyper enforce the header-read timeout, from the first byte of a request
        // and while a keep-alive connection waits for its next one.
        builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
        let builder = Arc::new(builder);
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        // EMFILE and friends: keep serving the connections we have.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let slot = match clients.admit(peer.ip()) {
                Ok(slot) => slot,
                Err(refusal) => {
                    // Closed at once: nothing is read, so a flood costs one accept each.
                    let cap = match refusal {
                        Refusal::Server => "server.max-connections",
                        Refusal::Client => "server.max-connections-per-ip",
                    };
                    tracing::debug!(%peer, cap, "connection refused at its cap");
                    drop(stream);
                    continue;
                }
            };
            // Small writes must leave at once: Nagle would hold back SSE frames.
            let _ = stream.set_nodelay(true);
            let state = state.clone();
            let clients = Arc::clone(&clients);
            let builder = Arc::clone(&builder);
            tokio::spawn(async move {
                let _slot = slot;
                let service = service_fn(move |req| {
                    let state = state.clone();
                    let limited = clients.request(peer.ip());
                    // Boxed: hyper keeps a slot of the service future's size for the whole
                    // life of the connection; the route futures are ~18 KiB, a box is 8 bytes
                    // and is freed once the response head is out (an SSE stream lives on in
                    // its body).
                    Box::pin(async move {
                        let response = match limited {
                            Ok(()) => routes::handle(state, req).await,
                            Err(retry_after) => too_many_requests(retry_after),
                        };
                        Ok::<_, std::convert::Infallible>(response)
                    })
                });
                if let Err(e) = builder.serve_connection(TokioIo::new(stream), service).await {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
            });
        }
        tracing::info!("stopped accepting connections");
    }
}

/// 429 with `Retry-After` (whole seconds) for a client over its request rate.
fn too_many_requests(retry_after: std::time::Duration) -> http::Response<crate::body::BoxBody> {
    let body = serde_json::json!({
        "code": 429,
        "msg": "too many requests from this client (server.max-requests-per-ip-per-minute)",
        "data": {},
    });
    let mut response = json_response(http::StatusCode::TOO_MANY_REQUESTS, &body);
    response.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from(retry_after.as_secs().max(1)));
    response
}

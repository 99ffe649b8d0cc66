//! The accept loop: hyper HTTP/1.1 on a tokio listener.

use std::future::Future;
use std::net::SocketAddr;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

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

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves; then stops accepting. In-flight streams keep running
    /// in their own tasks.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let Server { listener, state } = self;
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
            // Small writes must leave at once: Nagle would hold back SSE frames.
            let _ = stream.set_nodelay(true);
            let state = state.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, std::convert::Infallible>(routes::handle(state, req).await) }
                });
                if let Err(e) =
                    auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service).await
                {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
            });
        }
        tracing::info!("stopped accepting connections");
    }
}

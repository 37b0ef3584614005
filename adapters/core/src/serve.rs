//! Serving HTTP with limits (feature `serve`): the daemon's webhook server and the web
//! chat's listener both take connections from anyone who can reach the port, before any
//! login, so both get a header-read timeout and a cap on connections (axum's own `serve`
//! sets neither), here once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How a server protects itself.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Its name in the log (`http`, `web`).
    pub name: &'static str,
    /// A client has this long to send a request's headers (on a new connection and between
    /// requests on a kept-alive one); a slow or silent client is cut.
    pub header_read: Duration,
    /// At most this many connections at once; past it a new one is closed at once (and
    /// said at most once a minute).
    pub max_connections: usize,
    /// On shutdown, open connections finish their request within this long.
    pub drain: Duration,
}

/// Serve `app` on `listener` until `stop` is cancelled: HTTP/1.1 within `limits`. Each
/// request carries who sent it (`ConnectInfo<SocketAddr>`); `refused` is told each
/// connection turned away (for the metrics).
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: Limits,
    stop: CancellationToken,
    refused: fn(&'static str),
) {
    let connections = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let mut last_refusal_said: Option<std::time::Instant> = None;
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer): (_, SocketAddr) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, mostly: wait a little rather than spin.
                tracing::warn!(server = limits.name, error = %e, "could not accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            refused("connections");
            if last_refusal_said.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
                last_refusal_said = Some(std::time::Instant::now());
                tracing::warn!(server = limits.name, %peer, max = limits.max_connections, "too many connections; new ones are closed (said once a minute)");
            }
            continue;
        };
        let (app, stop) = (app.clone(), stop.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                tower_service::Service::call(&mut app.clone(), request)
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_read)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(limits.drain, connection).await;
                }
            }
            drop(permit);
        });
    }
}

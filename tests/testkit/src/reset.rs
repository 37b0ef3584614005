//! Connection resets for the fakes' HTTP servers. A fake serves its API with [`serve`], and a
//! test arms [`Resets`] for the next request that matches: that request's TCP connection is
//! then torn down with a reset (`SO_LINGER` 0, no byte of an answer), either before the
//! platform handled the request (nothing happened, the client must try again) or after
//! (the platform did it, the client never hears so). This is what a load balancer restart
//! or a dropped NAT entry looks like to the daemon's HTTP clients.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State, connect_info::Connected};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// When an armed reset cuts the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Before the fake looks at the request: the platform never saw it.
    BeforeHandling,
    /// After the fake handled it: the platform did it; its answer is lost.
    AfterHandling,
}

/// Which requests a reset is for: (method, path, body).
type Matcher = Box<dyn Fn(&Method, &str, &[u8]) -> bool + Send>;

struct Armed {
    matches: Matcher,
    when: When,
    left: usize,
}

/// The resets armed on one fake's server, and how many were done.
#[derive(Clone, Default)]
pub struct Resets {
    inner: Arc<Mutex<Armory>>,
}

#[derive(Default)]
struct Armory {
    armed: Vec<Armed>,
    done: usize,
}

impl Resets {
    /// Reset the connections of the next `n` requests that `matches` (method, path, body).
    pub fn arm(
        &self,
        n: usize,
        when: When,
        matches: impl Fn(&Method, &str, &[u8]) -> bool + Send + 'static,
    ) {
        self.lock().armed.push(Armed {
            matches: Box::new(matches),
            when,
            left: n,
        });
    }

    /// How many connections were reset so far.
    pub fn done(&self) -> usize {
        self.lock().done
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Armory> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn any_armed(&self) -> bool {
        !self.lock().armed.is_empty()
    }

    /// Whether this request's connection is to be reset, and when (the arming is used up).
    fn take(&self, method: &Method, path: &str, body: &[u8]) -> Option<When> {
        let mut state = self.lock();
        let index = state
            .armed
            .iter()
            .position(|a| (a.matches)(method, path, body))?;
        let armed = &mut state.armed[index];
        let when = armed.when;
        armed.left -= 1;
        if armed.left == 0 {
            state.armed.remove(index);
        }
        state.done += 1;
        Some(when)
    }
}

/// Serve `app` on `listener` with `resets` able to cut its connections; runs until the
/// runtime ends.
pub async fn serve(listener: TcpListener, app: Router, resets: Resets) {
    let app = app.layer(middleware::from_fn_with_state(resets, cut_if_armed));
    let _ = axum::serve(
        Cuttable(listener),
        app.into_make_service_with_connect_info::<Cut>(),
    )
    .await;
}

/// Requests larger than this are not looked at (no fake takes one near it).
const BODY_LIMIT: usize = 64 * 1024 * 1024;

async fn cut_if_armed(
    State(resets): State<Resets>,
    ConnectInfo(cut): ConnectInfo<Cut>,
    request: Request,
    next: Next,
) -> Response {
    if !resets.any_armed() {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, BODY_LIMIT).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let when = resets.take(&parts.method, parts.uri.path(), &bytes);
    let request = Request::from_parts(parts, Body::from(Bytes::clone(&bytes)));
    match when {
        None => next.run(request).await,
        Some(When::BeforeHandling) => {
            cut.now();
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        Some(When::AfterHandling) => {
            let response = next.run(request).await;
            cut.now();
            response
        }
    }
}

/// One connection's switch: once thrown, its socket answers every read and write with a
/// reset and is closed with `SO_LINGER` 0, so the peer gets an RST.
#[derive(Clone, Debug)]
struct Cut {
    thrown: Arc<AtomicBool>,
}

impl Cut {
    fn now(&self) {
        self.thrown.store(true, Ordering::SeqCst);
    }
}

impl Connected<IncomingStream<'_, Cuttable>> for Cut {
    fn connect_info(stream: IncomingStream<'_, Cuttable>) -> Cut {
        stream.remote_addr().clone()
    }
}

/// A listener whose connections carry a [`Cut`].
struct Cuttable(TcpListener);

impl Listener for Cuttable {
    type Io = CuttableStream;
    type Addr = Cut;

    async fn accept(&mut self) -> (CuttableStream, Cut) {
        loop {
            match self.0.accept().await {
                Ok((tcp, _)) => {
                    let cut = Cut {
                        thrown: Arc::new(AtomicBool::new(false)),
                    };
                    let stream = CuttableStream {
                        tcp,
                        thrown: cut.thrown.clone(),
                    };
                    return (stream, cut);
                }
                // Out of descriptors and the like: wait, as axum's own listener does.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<Cut> {
        Err(io::Error::other(
            "a cuttable listener has no address of its own",
        ))
    }
}

struct CuttableStream {
    tcp: TcpStream,
    thrown: Arc<AtomicBool>,
}

impl CuttableStream {
    /// `Some(reset)` once the switch is thrown; the socket will close with an RST.
    fn cut(&self) -> Option<io::Error> {
        if !self.thrown.load(Ordering::SeqCst) {
            return None;
        }
        let _ = self.tcp.set_zero_linger();
        Some(io::ErrorKind::ConnectionReset.into())
    }
}

impl AsyncRead for CuttableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(reset) = self.cut() {
            return Poll::Ready(Err(reset));
        }
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for CuttableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(reset) = self.cut() {
            return Poll::Ready(Err(reset));
        }
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(reset) = self.cut() {
            return Poll::Ready(Err(reset));
        }
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(reset) = self.cut() {
            return Poll::Ready(Err(reset));
        }
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

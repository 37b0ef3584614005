//! Connection resets for the fakes' HTTP servers. A fake serves its API with [`serve`], and a
//! test arms [`Resets`] for the next request that matches: that request's TCP connection is
//! then torn down with a reset (`SO_LINGER` 0, no byte of an answer), either before the
//! platform handled the request (nothing happened, the client must try again) or after
//! (the platform did it, the client never hears so). This is what a load balancer restart
//! or a dropped NAT entry looks like to the daemon's HTTP clients.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
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

/// The resets armed on one fake's server: how many requests matched one, and how many
/// connections were actually cut.
#[derive(Clone, Default)]
pub struct Resets {
    armed: Arc<Mutex<Vec<Armed>>>,
    matched: Arc<AtomicUsize>,
    cut: Arc<AtomicUsize>,
}

impl Resets {
    /// Reset the connections of the next `n` (at least one) requests that `matches`
    /// (method, path, body).
    pub fn arm(
        &self,
        n: usize,
        when: When,
        matches: impl Fn(&Method, &str, &[u8]) -> bool + Send + 'static,
    ) {
        assert!(n > 0, "arm at least one reset");
        self.lock().push(Armed {
            matches: Box::new(matches),
            when,
            left: n,
        });
    }

    /// How many requests matched an armed reset so far (counted when they arrive).
    pub fn matched(&self) -> usize {
        self.matched.load(Ordering::SeqCst)
    }

    /// Count a connection a fake cut by its own means (the web chat's page dropping its
    /// event stream).
    pub fn record_cut(&self) {
        self.cut.fetch_add(1, Ordering::SeqCst);
    }

    /// How many connections were cut so far (counted when the reset happens).
    pub fn cut(&self) -> usize {
        self.cut.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Armed>> {
        self.armed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether this request's connection is to be reset, and when (the arming is used up).
    fn take(&self, method: &Method, path: &str, body: &[u8]) -> Option<When> {
        let mut armed = self.lock();
        let index = armed.iter().position(|a| (a.matches)(method, path, body))?;
        let when = armed[index].when;
        armed[index].left -= 1;
        if armed[index].left == 0 {
            armed.remove(index);
        }
        self.matched.fetch_add(1, Ordering::SeqCst);
        Some(when)
    }
}

/// Serve `app` on `listener` with `resets` able to cut its connections; runs until the
/// runtime ends.
pub async fn serve(listener: TcpListener, app: Router, resets: Resets) {
    let listener = Cuttable {
        listener,
        cut: resets.cut.clone(),
    };
    let app = app.layer(middleware::from_fn_with_state(resets, cut_if_armed));
    let _ = axum::serve(listener, app.into_make_service_with_connect_info::<Cut>()).await;
}

/// Requests larger than this are not looked at (no fake takes one near it).
const BODY_LIMIT: usize = 64 * 1024 * 1024;

async fn cut_if_armed(
    State(resets): State<Resets>,
    ConnectInfo(cut): ConnectInfo<Cut>,
    request: Request,
    next: Next,
) -> Response {
    if resets.lock().is_empty() {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, BODY_LIMIT).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let when = resets.take(&parts.method, parts.uri.path(), &bytes);
    let request = Request::from_parts(parts, Body::from(bytes));
    match when {
        None => next.run(request).await,
        Some(When::BeforeHandling) => {
            cut.now();
            // Never written: the connection is cut first. Should the cut fail, the client
            // gets a refusal it will not retry, so a test relying on the reset fails.
            (StatusCode::BAD_REQUEST, "the connection was not reset").into_response()
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
#[derive(Clone)]
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
        Cut {
            thrown: stream.io().thrown.clone(),
        }
    }
}

/// A listener whose connections can be cut; counts the cuts.
struct Cuttable {
    listener: TcpListener,
    cut: Arc<AtomicUsize>,
}

impl Listener for Cuttable {
    type Io = CuttableStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (CuttableStream, SocketAddr) {
        loop {
            match self.listener.accept().await {
                Ok((tcp, addr)) => {
                    let stream = CuttableStream {
                        tcp,
                        thrown: Arc::new(AtomicBool::new(false)),
                        counted: false,
                        cut: self.cut.clone(),
                    };
                    return (stream, addr);
                }
                // Out of descriptors and the like: wait a moment and accept again.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

struct CuttableStream {
    tcp: TcpStream,
    thrown: Arc<AtomicBool>,
    /// Whether this connection's cut was counted.
    counted: bool,
    cut: Arc<AtomicUsize>,
}

impl CuttableStream {
    /// `Some(reset)` once the switch is thrown; the socket will close with an RST.
    fn cut(&mut self) -> Option<io::Error> {
        if !self.thrown.load(Ordering::SeqCst) {
            return None;
        }
        if !std::mem::replace(&mut self.counted, true) {
            let _ = self.tcp.set_zero_linger();
            self.cut.fetch_add(1, Ordering::SeqCst);
        }
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

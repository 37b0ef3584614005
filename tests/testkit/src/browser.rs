//! A real browser for the web chat's tests: Debian's headless Chromium, driven through
//! `chromedriver` over WebDriver (fantoccini). One browser per test, with its own profile;
//! both processes end when it is dropped. Missing programs skip the test loudly under
//! plain `cargo test` and fail it under `.ci/run` ([`crate::needs`]).

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use fantoccini;
use fantoccini::{Client, ClientBuilder};
use serde_json::json;

/// A headless Chromium under chromedriver.
pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Browser {
    /// Start one, `width`×`height` pixels; `None` when Chromium or chromedriver is missing
    /// and skipping is allowed.
    pub async fn start(width: u32, height: u32) -> Option<Browser> {
        let chromium: PathBuf =
            crate::needs::program("chromium", "the web chat in a real browser")?;
        let driver_path = crate::needs::program("chromedriver", "the web chat in a real browser")?;
        let port = free_port();
        let driver = Command::new(driver_path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let deadline = Instant::now() + Duration::from_secs(15);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen within 15 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let mut args = vec![
            "--headless=new".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--no-first-run".to_owned(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        // As root (CI containers) Chromium refuses to start with its sandbox.
        if nix_is_root() {
            args.push("--no-sandbox".to_owned());
        }
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({"binary": chromium, "args": args}),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a WebDriver session with Chromium");
        Some(Browser {
            client,
            driver,
            _profile: profile,
        })
    }
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

//! A real PostgreSQL server for the tests, from Debian's `postgresql` package (the newest
//! `/usr/lib/postgresql/<version>/bin`): a new cluster in a temporary directory, owned by an
//! unprivileged user when the tests run as root (PostgreSQL refuses to run as root), with
//! password (`scram-sha-256`) authentication only and no TCP listener at all — clients come
//! through a private Unix socket directory, since a command the agent runs on this machine
//! has the network. The server is stopped (fast shutdown) and its directory removed when the
//! value is dropped.
//!
//! `fsync` is off: these servers are never killed under the tests' feet (the nodes are), and
//! a test cluster's durability is not what is tested.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// The user the server runs as when the tests run as root (`nobody`).
const UNPRIVILEGED: u32 = 65_534;
/// The role the tests connect as.
pub const ROLE: &str = "hermes";
/// How long the cluster may take to be made and to start.
const START_WITHIN: Duration = Duration::from_secs(60);
/// The port names the socket file only (`.s.PGSQL.5432`): nothing listens on TCP.
const PORT: u16 = 5432;

pub struct TestPostgres {
    dir: PathBuf,
    server: Child,
    bin: PathBuf,
    password: String,
}

/// The newest installed server's `bin` directory.
fn server_bin() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

impl TestPostgres {
    /// A new server, running and accepting the [`ROLE`] with its password. `None` when
    /// PostgreSQL is not installed and skipping is allowed (see [`crate::needs`]).
    pub fn start() -> Option<TestPostgres> {
        let bin = match server_bin() {
            Some(bin) => bin,
            None => {
                crate::needs::missing(
                    "PostgreSQL (/usr/lib/postgresql/<version>/bin/postgres, Debian's `postgresql`)",
                    "the PostgreSQL store",
                );
                return None;
            }
        };
        Some(TestPostgres::start_with(bin))
    }

    fn start_with(bin: PathBuf) -> TestPostgres {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "hermes-pg-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("socket")).unwrap();
        let password = format!("pw-{:016x}", rand_u64());
        std::fs::write(dir.join("password"), &password).unwrap();
        let as_root = running_as_root();
        if as_root {
            for path in [dir.clone(), dir.join("socket"), dir.join("password")] {
                std::os::unix::fs::chown(&path, Some(UNPRIVILEGED), Some(UNPRIVILEGED)).unwrap();
            }
        }
        let command = |program: &str| -> Command {
            if as_root {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={UNPRIVILEGED}"))
                    .arg(format!("--regid={UNPRIVILEGED}"))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(bin.join(program));
                c
            } else {
                Command::new(bin.join(program))
            }
        };
        let data = dir.join("data");
        let made = command("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", ROLE, "--auth=scram-sha-256", "--encoding=UTF8"])
            .args(["--locale=C", "--no-sync"])
            .arg(format!("--pwfile={}", dir.join("password").display()))
            // initdb changes into the data directory's parent; `nobody` may not read ours.
            .current_dir(&dir)
            .stdout(Stdio::null())
            .output()
            .expect("running initdb");
        assert!(
            made.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        if as_root {
            std::os::unix::fs::chown(dir.join("server.log"), Some(UNPRIVILEGED), None).unwrap();
        }
        let server = command("postgres")
            .arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(dir.join("socket"))
            .args(["-c", "listen_addresses=", "-p", &PORT.to_string()])
            .args(["-c", "fsync=off", "-c", "max_connections=200"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("starting postgres");
        let pg = TestPostgres {
            dir,
            server,
            bin,
            password,
        };
        pg.wait_ready();
        pg
    }

    /// Until `postmaster.pid` says the server is ready for connections.
    fn wait_ready(&self) {
        let deadline = Instant::now() + START_WITHIN;
        let pid_file = self.dir.join("data").join("postmaster.pid");
        loop {
            let status = std::fs::read_to_string(&pid_file).unwrap_or_default();
            if status.lines().any(|l| l.trim() == "ready") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "PostgreSQL not ready within {START_WITHIN:?}; its log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// One server for the tests of this process that run at the same time: started by the
    /// first that asks, stopped when the last lets go (so none outlives the process).
    pub fn shared() -> Option<Arc<TestPostgres>> {
        static SHARED: Mutex<Weak<TestPostgres>> = Mutex::new(Weak::new());
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pg) = shared.upgrade() {
            return Some(pg);
        }
        let pg = Arc::new(TestPostgres::start()?);
        *shared = Arc::downgrade(&pg);
        Some(pg)
    }

    /// A new, empty database: its name.
    pub fn create_database(&self) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("t{}", NEXT.fetch_add(1, Ordering::Relaxed));
        if let Err(e) = self.psql(
            &self.password,
            "postgres",
            &format!("CREATE DATABASE {name}"),
        ) {
            panic!("creating database {name}: {e}\n{}", self.log());
        }
        name
    }

    /// The URL of `database` for the [`ROLE`], through the socket directory, with the
    /// password in it.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://{ROLE}:{}@/{database}?host={}&port={PORT}",
            self.password,
            self.socket_dir().display()
        )
    }

    /// The directory of the server's Unix socket.
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.join("socket")
    }

    /// The [`ROLE`]'s password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// Run `sql` with `psql` as the [`ROLE`] with `password`: its output, or its error.
    pub fn psql(&self, password: &str, database: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .arg("-h")
            .arg(self.socket_dir())
            .args(["-p", &PORT.to_string(), "-U", ROLE, "-d", database])
            .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .env("PGPASSWORD", password)
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running psql: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// The data directory (to check who owns it).
    pub fn data_dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        // SIGINT: a fast shutdown (sessions ended, no waiting for clients).
        let _ = Command::new("kill")
            .args(["-INT", &self.server.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.server.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.server.kill();
        let _ = self.server.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether this process runs as root (`/proc/self` belongs to the effective user).
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A value no other test run guesses (the password of a throwaway cluster).
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_starts_unprivileged_and_takes_only_the_password() {
        let Some(pg) = TestPostgres::start() else {
            return;
        };
        assert_eq!(
            pg.psql(pg.password(), "postgres", "SELECT current_user")
                .unwrap(),
            ROLE
        );
        // Password authentication, not trust: a wrong password is refused.
        let refused = pg
            .psql("not-the-password", "postgres", "SELECT 1")
            .unwrap_err();
        assert!(
            refused.contains("password authentication failed"),
            "{refused}"
        );
        // Nothing listens on TCP; the server does not run as root.
        assert_eq!(
            pg.psql(pg.password(), "postgres", "SHOW listen_addresses")
                .unwrap(),
            ""
        );
        let owner = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(pg.data_dir().join("data")).unwrap().uid()
        };
        if running_as_root() {
            assert_eq!(owner, UNPRIVILEGED);
        }
    }
}

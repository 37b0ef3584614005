//! `hermes-gateway store …`: moving a home's state into a shared PostgreSQL store.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;

use crate::config::{self, PgTarget};
use crate::store::Store;

#[derive(Subcommand)]
pub enum StoreAction {
    /// Copy this home's SQLite database (sessions, history, pairings, approvals, cron,
    /// pending messages) into a new, empty PostgreSQL store, and check the copy:
    /// `store migrate --to postgres://hermes@db/hermes`
    Migrate {
        /// The PostgreSQL store's URL; without a password in it, the configured store's
        /// (store.password_file, HERMES_STORE_PASSWORD) is used
        #[arg(long)]
        to: String,
    },
}

pub async fn run(home: &Path, action: StoreAction) -> ExitCode {
    match action {
        StoreAction::Migrate { to } => migrate(home, to).await,
    }
}

async fn migrate(home: &Path, to: String) -> ExitCode {
    let home = home.to_path_buf();
    let copied = tokio::task::spawn_blocking(move || {
        let loaded = config::load(&home);
        let password = loaded
            .store
            .as_ref()
            .and_then(|s| s.postgres.as_ref())
            .and_then(PgTarget::password);
        let target = PgTarget::parse(&to, password.as_deref()).map_err(|e| format!("--to {e}"))?;
        let path = home.join("gateway.db");
        crate::store::copy::sqlite_to_postgres(&path, &target)
            .map(|copied| (copied, target.shown().to_owned(), path))
            .map_err(|e| e.to_string())
    })
    .await;
    match copied {
        Ok(Ok((copied, shown, path))) => {
            for (table, rows) in &copied.tables {
                println!("  {table:<22} {rows:>9} rows");
            }
            println!(
                "Copied {} rows from {} to {shown}, and checked them. Point every node at it \
                 (store.url or HERMES_STORE_URL) and give each the same state.key as this home's.",
                copied.rows(),
                path.display()
            );
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("hermes-gateway: {}", crate::secrets::scrub(&e));
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("hermes-gateway: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `status [--cluster]`: the store's counts; with `--cluster`, every node that has run on
/// it (how long ago it last said it was alive) and every lease (who holds it, since when,
/// and for how much longer).
pub async fn status(store: Store, cluster: bool) -> ExitCode {
    let counts = match store.status_counts().await {
        Ok(counts) => counts,
        Err(e) => {
            eprintln!("hermes-gateway: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "sessions open {}, events being handled {}, approvals waiting {}, processes running {}, messages queued {}",
        counts.sessions,
        counts.inbox_open,
        counts.approvals_pending,
        counts.processes_running,
        counts.outbox_pending
    );
    if !cluster {
        return ExitCode::SUCCESS;
    }
    let (nodes, leases) = match (store.nodes().await, store.leases().await) {
        (Ok(nodes), Ok(leases)) => (nodes, leases),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("hermes-gateway: {e}");
            return ExitCode::FAILURE;
        }
    };
    if nodes.is_empty() {
        println!("No node has run on this store as one of several (a SQLite store is one node).");
    }
    let seconds = |ms: i64| format!("{:.1} s", ms as f64 / 1000.0);
    for node in &nodes {
        println!(
            "node {:<20} version {:<8} up {:>10}  last seen {} ago",
            node.id,
            node.version,
            seconds(node.age_ms),
            seconds(node.silent_ms)
        );
    }
    for lease in &leases {
        let state = if lease.left_ms >= 0 {
            format!("for {} more", seconds(lease.left_ms))
        } else {
            format!("lapsed {} ago", seconds(-lease.left_ms))
        };
        println!(
            "lease {:<28} held by {:<20} token {:<4} since {} ago, {state}",
            lease.name,
            lease.holder,
            lease.token,
            seconds(lease.held_ms)
        );
    }
    ExitCode::SUCCESS
}

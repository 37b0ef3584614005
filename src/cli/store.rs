//! `hermes-gateway store …`: moving a home's state into a shared PostgreSQL store.

use std::path::Path;
use std::process::ExitCode;

use clap::Subcommand;

use crate::config::{self, PgTarget};

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

//! `/reload_mcp` and `/reload_skills` (Hermes' `/reload-mcp`, `/reload-skills`, texts
//! included): the MCP servers stopped and connected again from `config.yaml` as it reads
//! now, and the skills directory scanned again for the system prompt's index. Both change
//! what every later turn is offered, so they wait for this conversation's running turn.

use super::*;

impl SessionActor {
    /// `/reload_mcp`.
    pub(super) async fn reload_mcp(&self) -> String {
        let home = self.services.home.clone();
        let loaded = match tokio::task::spawn_blocking(move || crate::config::load(&home)).await {
            Ok(loaded) => loaded,
            Err(e) => return format!("❌ MCP reload failed: {e}"),
        };
        loaded.remember_secrets();
        let Some(config) = loaded.config else {
            let errors: Vec<String> = loaded.errors().map(|p| p.to_string()).collect();
            return format!(
                "❌ MCP reload failed: the configuration has errors ({}); the servers stay as they are.",
                errors.join("; ")
            );
        };
        let reloaded = self.services.mcp.reload(config.mcp_servers).await;
        tracing::info!(?reloaded, "mcp: servers reloaded from the chat");
        let mut lines = vec!["🔄 **MCP Servers Reloaded**\n".to_owned()];
        for (mark, what, names) in [
            ("♻️", "Reconnected", &reloaded.reconnected),
            ("➕", "Added", &reloaded.added),
            ("➖", "Removed", &reloaded.removed),
        ] {
            if !names.is_empty() {
                lines.push(format!("{mark} {what}: {}", names.join(", ")));
            }
        }
        lines.push(if reloaded.servers == 0 {
            "No MCP servers connected.".to_owned()
        } else {
            format!(
                "\n🔧 {} tool(s) available from {} server(s)",
                reloaded.tools, reloaded.servers
            )
        });
        lines.join("\n")
    }

    /// `/reload_skills`.
    pub(super) async fn reload_skills(&self) -> String {
        let agent = self.services.agent.clone();
        let reloaded = match tokio::task::spawn_blocking(move || agent.prompt.reload_skills()).await
        {
            Ok(reloaded) => reloaded,
            Err(e) => return format!("❌ Skills reload failed: {e}"),
        };
        let mut text = "🔄 **Skills Reloaded**\n".to_owned();
        if reloaded.added.is_empty() && reloaded.removed.is_empty() {
            text.push_str(&format!(
                "\nNo new skills detected.\n\n📚 {} skill(s) available",
                reloaded.total
            ));
            return text;
        }
        for (heading, list) in [
            ("➕ **Added Skills:**", &reloaded.added),
            ("➖ **Removed Skills:**", &reloaded.removed),
        ] {
            if list.is_empty() {
                continue;
            }
            text.push_str(&format!("\n{heading}"));
            for (name, description) in list {
                text.push_str(&match description.is_empty() {
                    true => format!("\n    - {name}"),
                    false => format!("\n    - {name}: {description}"),
                });
            }
            text.push('\n');
        }
        text.push_str(&format!("\n📚 {} skill(s) available", reloaded.total));
        text
    }
}

//! The `hermes-gateway` binary: installs the TLS crypto provider and hands over to the CLI.

fn main() -> std::process::ExitCode {
    // One process-wide rustls provider, so no crate's TLS setup can panic choosing one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    hermes_gateway::cli::main()
}

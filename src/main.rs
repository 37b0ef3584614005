//! The `hermes-gateway` binary: installs the TLS crypto provider and hands over to the CLI.

fn main() -> std::process::ExitCode {
    // The confinement's holder is this program started again: it does its one job before
    // anything else runs (see `confine::holder`).
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(hermes_gateway::confine::HOLDER_ARG))
    {
        return hermes_gateway::confine::holder::main();
    }
    // Before anything else: a non-dumpable process cannot be read through
    // /proc/<pid>/environ or /proc/<pid>/mem, or traced, by the commands it runs (same
    // user, no CAP_SYS_PTRACE), so the tokens in its environment stay its own. It also
    // keeps secrets out of core dumps.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!(
            "hermes-gateway: could not make the process non-dumpable ({e}); child processes may read its environment"
        );
    }
    // SAFETY: no other thread exists yet.
    unsafe { hermes_gateway::secrets::take_from_environment() };
    // One process-wide rustls provider, so no crate's TLS setup can panic choosing one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    hermes_gateway::cli::main()
}

//! The Landlock layer. Landlock can only allow: a ruleset names what a command may do
//! beneath a few directories, and everything else is refused by the kernel whatever the
//! file's owner and mode say. Its job here:
//!
//! - **With the mount namespace** (the usual case), writes: a command writes only below the
//!   working directory, the person's home, the temporary directories and the roots the
//!   operator allowed, and never to the gateway's program or systemd's user configuration.
//!   That is what keeps a daemon running as root from changing `/etc` or `/usr`. Reads are
//!   left to the mount namespace, which hides the home.
//! - **Alone** (no user namespaces on this host), reads too: everything but the hidden
//!   places is readable, which takes one rule per entry of every directory on the way down
//!   to a hidden place, so the directories on that way can be listed but nothing new can be
//!   made directly in them. `terminal.network: false` refuses TCP.
//! - In both, a command cannot reach an abstract Unix socket made outside its own
//!   confinement; alone, it cannot signal a process outside it either (the daemon included).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

use super::layout::Layout;

/// The newest rights asked for; the kernel's older ABI drops what it does not know.
const ASKED: ABI = ABI::V6;
/// The ABI that scopes abstract Unix sockets and signals (Linux 6.12).
pub const SCOPES_ABI: i32 = 6;

/// Device files every program may open for writing.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// The Landlock ABI this kernel speaks, or `None` without Landlock.
pub fn kernel_abi() -> Option<i32> {
    const VERSION: libc::c_uint = 1;
    // SAFETY: the documented probe: no attributes, size 0, the version flag.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            VERSION,
        )
    };
    (abi > 0).then_some(abi as i32)
}

/// What a ruleset must do.
pub struct Policy<'a> {
    pub layout: &'a Layout,
    /// Refuse reads of the hidden places too (no mount namespace hides them).
    pub guard_reads: bool,
    /// Commands may use the network (`terminal.network`).
    pub network: bool,
    /// Refuse signals to processes outside the confinement (without a PID namespace).
    pub scope_signals: bool,
    /// Where the file system the rules name is seen (a jail's root, `/proc/<pid>/root`:
    /// its `/dev/shm`, `/dev/pts` and `/proc` are its own); `None`: this process's.
    pub root: Option<&'a Path>,
}

fn read_rights() -> BitFlags<AccessFs> {
    AccessFs::from_read(ASKED)
}

/// Everything that changes the file system (device ioctls are left to the file modes).
fn write_rights() -> BitFlags<AccessFs> {
    AccessFs::from_all(ASKED) & !AccessFs::from_read(ASKED) & !AccessFs::IoctlDev
}

/// Build the ruleset for `policy`: a file descriptor for `landlock_restrict_self`.
pub fn ruleset(policy: &Policy) -> Result<OwnedFd, String> {
    let failed = |e: landlock::RulesetError| format!("Landlock: {e}");
    let mut handled = write_rights();
    if policy.guard_reads {
        handled |= read_rights();
    }
    let mut scopes = BitFlags::from(Scope::AbstractUnixSocket);
    if policy.scope_signals {
        scopes |= Scope::Signal;
    }
    let mut base = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(handled)
        .map_err(failed)?
        .scope(scopes)
        .map_err(failed)?;
    // With a jail the network namespace cuts the network; Landlock alone refuses TCP.
    if !policy.network && policy.guard_reads {
        base = base
            .handle_access(AccessNet::from_all(ASKED))
            .map_err(failed)?;
    }
    let mut rules = base.create().map_err(failed)?;
    let layout = policy.layout;
    let hidden: Vec<PathBuf> = layout
        .covered
        .iter()
        .chain(&layout.emptied)
        .chain(&layout.nulled)
        .cloned()
        .collect();

    let at = |path: &Path| match policy.root {
        Some(root) => root.join(path.strip_prefix("/").unwrap_or(path)),
        None => path.to_path_buf(),
    };
    if policy.guard_reads {
        rules = grant_except(rules, Path::new("/"), read_rights(), &hidden)?;
        for hand_in in &layout.handed_in {
            let mut access = read_rights();
            if hand_in.writable {
                access |= write_rights();
            }
            rules = grant(rules, &at(&hand_in.path), access)?;
        }
    }
    // Alone, Landlock must leave the hidden and read-only places out.
    if policy.guard_reads {
        let unwritable: Vec<PathBuf> = hidden.iter().chain(&layout.read_only).cloned().collect();
        for root in &layout.writable {
            rules = grant_except(rules, root, write_rights(), &unwritable)?;
        }
    } else {
        // With the mount namespace the hidden and read-only places are read-only mounts
        // already, and the emptied ones are the jail's own.
        for root in layout.writable.iter().chain(&layout.emptied) {
            rules = grant(rules, &at(root), write_rights())?;
        }
    }
    for device in DEVICES.iter().chain(&["/proc"]) {
        rules = grant(rules, &at(Path::new(device)), write_rights())?;
    }
    Ok(Option::<OwnedFd>::from(rules).ok_or("Landlock is not available on this kernel")?)
}

/// Allow `access` beneath `root` except beneath the `holes`: a root with no hole inside it
/// gets one rule; otherwise each of its entries is taken in turn (the root itself may then
/// only be listed).
fn grant_except(
    rules: RulesetCreated,
    root: &Path,
    access: BitFlags<AccessFs>,
    holes: &[PathBuf],
) -> Result<RulesetCreated, String> {
    if holes.iter().any(|h| root.starts_with(h)) {
        return Ok(rules);
    }
    if !holes.iter().any(|h| h.starts_with(root)) {
        return grant(rules, root, access);
    }
    let mut rules = grant(rules, root, access & AccessFs::ReadDir)?;
    let Ok(entries) = std::fs::read_dir(root) else {
        return Ok(rules);
    };
    for entry in entries.flatten() {
        let path = entry.path();
        // An entry that is a link is judged by where it leads: one into a hidden place, or
        // to a directory holding one, gets nothing.
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            let Ok(target) = std::fs::canonicalize(&path) else {
                continue;
            };
            if holes
                .iter()
                .any(|h| target.starts_with(h) || h.starts_with(&target))
            {
                continue;
            }
        }
        rules = grant_except(rules, &path, access, holes)?;
    }
    Ok(rules)
}

/// Allow `access` beneath `path` (a file gets only the rights a file can have); a path
/// that does not exist is skipped.
fn grant(
    rules: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, String> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(rules);
    };
    let access = if meta.is_dir() {
        access
    } else {
        access & AccessFs::from_file(ASKED)
    };
    if access.is_empty() {
        return Ok(rules);
    }
    let Ok(fd) = PathFd::new(path) else {
        return Ok(rules);
    };
    rules
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| format!("Landlock rule for {}: {e}", path.display()))
}

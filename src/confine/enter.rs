//! Putting one command into its confinement, in the child between `fork` and `exec`.
//!
//! The daemon is multi-threaded, so after `fork` its child may only make system calls:
//! everything here is prepared before (paths as C strings, file descriptors opened) and
//! nothing allocates. With a jail the child joins the jail's user, mount, IPC and network
//! namespaces through its holder's pidfd and forks once more, because only a new process
//! enters a PID namespace: the first child stays outside as the command's *relay* (it is
//! the process the daemon spawned, waits for the command and exits the same way, so the
//! daemon's timeouts, `/stop` and group kills work unchanged), the second is the command.
//! The command then gets `no_new_privs`, the seccomp filter ([`super::seccomp`]), the
//! Landlock ruleset and no capabilities at all, and dies if its relay dies.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

/// What the child needs to enter a confinement, made before the fork.
pub struct Entry {
    /// The jail to join: its holder's pidfd and the namespaces to take from it.
    pub jail: Option<(RawFd, libc::c_int)>,
    /// The working directory, taken again inside the jail's mount namespace.
    pub cwd: CString,
    /// Drop supplementary groups first (a daemon running as root can, mostly).
    pub drop_groups: bool,
    /// The Landlock ruleset to restrict the command with.
    pub ruleset: Option<RawFd>,
    /// The seccomp filter that keeps it from making setuid files.
    pub filter: &'static [libc::sock_filter],
}

fn check(result: libc::c_int) -> io::Result<()> {
    if result == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Enter the confinement; returns in the process that goes on to `exec` the command.
///
/// # Safety
/// Only between `fork` and `exec` (a `pre_exec` hook): it may fork and never return in
/// the relay.
pub unsafe fn enter(entry: &Entry) -> io::Result<()> {
    // SAFETY (all blocks below): plain system calls on values prepared before the fork.
    unsafe {
        // The daemon's signal handlers are still installed here and would write into its
        // own signal pipe: a SIGTERM meant for this command would look like one for the
        // daemon. Default dispositions until `exec`.
        reset_signal_handlers();
        if entry.drop_groups {
            // Refused where this root is itself inside a user namespace that denies it:
            // such groups cannot be dropped (as for a daemon that is not root).
            libc::setgroups(0, std::ptr::null());
        }
        if let Some((pidfd, namespaces)) = entry.jail {
            check(libc::setns(pidfd, namespaces))?;
            // Joining a mount namespace moves the working directory to its root.
            check(libc::chdir(entry.cwd.as_ptr()))?;
            match libc::fork() {
                -1 => return Err(io::Error::last_os_error()),
                0 => {}
                command => relay(command),
            }
            // The command: it must not outlive its relay, which the daemon waits for.
            check(libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ))?;
            // Inside the PID namespace the relay, outside it, is parent 0; parent 1 means
            // the relay is already gone.
            if libc::getppid() == 1 {
                libc::_exit(1);
            }
        }
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        super::seccomp::install(entry.filter)?;
        if let Some(ruleset) = entry.ruleset
            && libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0
        {
            return Err(io::Error::last_os_error());
        }
        drop_capabilities()?;
    }
    Ok(())
}

/// The relay: wait for the command and end the same way (its exit code, or its signal).
unsafe fn relay(command: libc::pid_t) -> ! {
    // SAFETY: system calls only; the relay never returns to Rust code.
    unsafe {
        // None of the daemon's descriptors stay open here (the pipes would not reach
        // end-of-file, and `std` learns that `exec` worked only when every copy of its
        // error pipe is closed).
        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
        let mut status = 0;
        loop {
            let waited = libc::waitpid(command, &mut status, 0);
            if waited == command {
                break;
            }
            if waited == -1 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        }
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        let signal = libc::WTERMSIG(status);
        libc::signal(signal, libc::SIG_DFL);
        let mut only = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut only);
        libc::sigaddset(&mut only, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
        libc::kill(libc::getpid(), signal);
        libc::_exit(128 + signal)
    }
}

/// Every caught signal back to its default disposition.
unsafe fn reset_signal_handlers() {
    // SAFETY: sigaction on valid signal numbers with a zeroed, then filled, struct.
    unsafe {
        for signal in 1..=libc::SIGRTMAX() {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut current = std::mem::zeroed::<libc::sigaction>();
            if libc::sigaction(signal, std::ptr::null(), &mut current) != 0 {
                continue;
            }
            if current.sa_sigaction != libc::SIG_DFL && current.sa_sigaction != libc::SIG_IGN {
                let mut default = std::mem::zeroed::<libc::sigaction>();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
    }
}

/// No capability in any set, none that can come back: the bounding set emptied, the
/// ambient set cleared, then the rest.
unsafe fn drop_capabilities() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    // SAFETY: prctl and capset with the kernel's own layouts.
    unsafe {
        for capability in 0..64 {
            // Numbers past the kernel's last capability answer EINVAL, and a process
            // without CAP_SETPCAP (a daemon that is not root, outside a jail) EPERM:
            // nothing to drop either way.
            libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0);
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
        let header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let none = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &header, none.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

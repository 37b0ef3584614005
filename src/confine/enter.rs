//! The child side of starting one command: what runs between `clone` and `exec`.
//!
//! The daemon starts commands like `posix_spawn` does, with `clone(CLONE_VM | CLONE_VFORK)`:
//! the child borrows the daemon's memory (nothing is copied, whatever the daemon's size)
//! while the daemon's calling thread waits, and runs only system calls on what the parent
//! prepared ([`Start`]), on a stack of its own, with every signal blocked until it resets
//! them. To join a jail's PID namespace a process must be *made* in it, so the first child
//! joins the jail's namespaces (`setns` through the holder's pidfd) and makes the command
//! with `CLONE_PARENT`: the command is the daemon's own child, inside the jail, and the first
//! child exits. The command then takes its own process group, its pipes, its working
//! directory, `no_new_privs`, the seccomp filter ([`super::seccomp`]), the Landlock ruleset
//! and no capabilities at all, and `exec`s. A failure is written where the daemon reads it.

use std::ffi::CString;
use std::os::fd::RawFd;

/// Everything the children need, made by the daemon before `clone`.
pub(super) struct Start {
    /// The program, resolved, and `argv`/`envp` as NULL-ended pointer arrays into the
    /// strings below.
    pub path: CString,
    pub argv: Vec<*const libc::c_char>,
    pub envp: Vec<*const libc::c_char>,
    /// Owners of the strings `argv` and `envp` point into (kept, never read).
    pub _strings: Vec<CString>,
    /// The working directory (taken after joining the jail's mount namespace).
    pub cwd: CString,
    /// The descriptors that become 0, 1 and 2.
    pub stdio: [RawFd; 3],
    /// The jail to join: its holder's pidfd and the namespaces to take from it.
    pub jail: Option<(RawFd, libc::c_int)>,
    /// Drop supplementary groups first (a daemon running as root can, mostly).
    pub drop_groups: bool,
    /// The Landlock ruleset to restrict the command with.
    pub ruleset: Option<RawFd>,
    /// The seccomp filter that keeps it from making setuid files (none: unconfined).
    pub filter: Option<&'static [libc::sock_filter]>,
    /// The command's stack (the first child's is the other half of the same mapping).
    pub command_stack: *mut libc::c_void,
    /// Written by the children: the command's pid, or why it could not start.
    pub pid: libc::pid_t,
    pub errno: libc::c_int,
    /// Which step failed, for the message.
    pub step: &'static str,
}

fn errno() -> libc::c_int {
    // SAFETY: reads this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Record a failure and end the child.
unsafe fn fail(start: *mut Start, step: &'static str) -> ! {
    // SAFETY: `start` is the parent's, alive while it waits; _exit does not return.
    unsafe {
        (*start).errno = errno();
        (*start).step = step;
        libc::_exit(127)
    }
}

/// The first child with a jail: join it, then make the command inside it as the
/// daemon's child.
pub(super) extern "C" fn joiner(arg: *mut libc::c_void) -> libc::c_int {
    let start = arg as *mut Start;
    // SAFETY: `start` points at the parent's `Start`, which lives until the parent
    // resumes (CLONE_VFORK); system calls only.
    unsafe {
        if (*start).drop_groups {
            // Refused where this root is itself inside a user namespace that denies it:
            // such groups cannot be dropped (as for a daemon that is not root).
            libc::setgroups(0, std::ptr::null());
        }
        let Some((pidfd, namespaces)) = (*start).jail else {
            fail(start, "joining the jail")
        };
        if libc::setns(pidfd, namespaces) != 0 {
            fail(start, "joining the jail");
        }
        let made = libc::clone(
            command,
            (*start).command_stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PARENT | libc::SIGCHLD,
            arg,
        );
        if made < 0 {
            fail(start, "making the command in the jail");
        }
        (*start).pid = made;
        libc::_exit(0)
    }
}

/// The command: its group, pipes, directory, restrictions, then `exec`.
pub(super) extern "C" fn command(arg: *mut libc::c_void) -> libc::c_int {
    let start = arg as *mut Start;
    // SAFETY: as for `joiner`; system calls only.
    unsafe {
        reset_signals();
        if (*start).jail.is_none() && (*start).drop_groups {
            libc::setgroups(0, std::ptr::null());
        }
        if libc::setpgid(0, 0) != 0 {
            fail(start, "a process group");
        }
        for (to, from) in (*start).stdio.iter().enumerate() {
            if libc::dup2(*from, to as libc::c_int) < 0 {
                fail(start, "its standard streams");
            }
        }
        if libc::chdir((*start).cwd.as_ptr()) != 0 {
            fail(start, "its working directory");
        }
        if let Some(filter) = (*start).filter {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                fail(start, "no_new_privs");
            }
            if super::seccomp::install(filter).is_err() {
                fail(start, "the seccomp filter");
            }
            if let Some(ruleset) = (*start).ruleset
                && libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0
            {
                fail(start, "Landlock");
            }
            drop_capabilities();
        }
        unblock_signals();
        libc::execve(
            (*start).path.as_ptr(),
            (*start).argv.as_ptr(),
            (*start).envp.as_ptr(),
        );
        fail(start, "exec")
    }
}

/// Every signal back to its default disposition (the daemon's handlers would run on this
/// borrowed memory); still blocked, as the parent left them, until just before `exec`.
unsafe fn reset_signals() {
    // SAFETY: sigaction on valid signal numbers with a zeroed struct set to SIG_DFL.
    unsafe {
        let mut default = std::mem::zeroed::<libc::sigaction>();
        default.sa_sigaction = libc::SIG_DFL;
        for signal in 1..=libc::SIGRTMAX() {
            if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
    }
}

unsafe fn unblock_signals() {
    // SAFETY: an empty set, applied to this thread.
    unsafe {
        let mut none = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
}

/// No capability in any set, none that can come back: the bounding set emptied, the
/// ambient set cleared, then the rest.
unsafe fn drop_capabilities() {
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
        libc::syscall(libc::SYS_capset, &header, none.as_ptr());
    }
}

//! One seccomp filter for every confined command: no file is made setuid or setgid.
//! `no_new_privs` keeps such a file from giving the command anything, but the file stays
//! on the host: outside the jail anyone who runs it gets the daemon's user (the one that
//! can read the gateway's secrets), or root when the daemon runs as root. So `chmod`,
//! `open`/`creat` with `O_CREAT` or `O_TMPFILE`, and `mknod` refuse a mode with
//! `S_ISUID` or `S_ISGID` (`EPERM`), as systemd's `RestrictSUIDSGID=` does; `openat2`,
//! whose mode a filter cannot read, answers `ENOSYS` (the C library then uses `openat`);
//! another architecture's system calls (32-bit programs) answer `ENOSYS`.

use std::sync::OnceLock;

/// `AUDIT_ARCH_*` of this build's architecture.
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xC000_00B7;

/// x32's system calls on x86_64 (another ABI, same `AUDIT_ARCH`).
#[cfg(target_arch = "x86_64")]
const X32_BIT: u32 = 0x4000_0000;

/// `O_CREAT` and `O_TMPFILE`'s own bit: either makes a file with the call's mode.
const CREATING: u32 = (libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u32;
const SET_ID: u32 = libc::S_ISUID | libc::S_ISGID;

/// The filter, made once.
pub fn filter() -> &'static [libc::sock_filter] {
    static FILTER: OnceLock<Vec<libc::sock_filter>> = OnceLock::new();
    FILTER.get_or_init(build)
}

/// Install `filter` on the calling thread (after `no_new_privs`); system calls only.
///
/// # Safety
/// `filter` must be a valid program (from [`filter`]).
pub unsafe fn install(filter: &[libc::sock_filter]) -> std::io::Result<()> {
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl(2) with a program that outlives the call.
    let done = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &program as *const libc::sock_fprog,
        )
    };
    if done != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn statement(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// Load the low 32 bits of argument `n` (little-endian `seccomp_data`).
fn argument(n: u32) -> libc::sock_filter {
    statement(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 16 + 8 * n)
}

fn answer(value: u32) -> libc::sock_filter {
    statement(libc::BPF_RET | libc::BPF_K, value)
}

/// System calls that make or change a file's mode: (number, the mode's argument, the
/// flags' argument when the mode counts only with `O_CREAT`/`O_TMPFILE`).
fn calls() -> Vec<(libc::c_long, u32, Option<u32>)> {
    let mut calls = vec![
        (libc::SYS_fchmod, 1, None),
        (libc::SYS_fchmodat, 2, None),
        (libc::SYS_fchmodat2, 2, None),
        (libc::SYS_openat, 3, Some(2)),
        (libc::SYS_mknodat, 2, None),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        (libc::SYS_chmod, 1, None),
        (libc::SYS_creat, 1, None),
        (libc::SYS_open, 2, Some(1)),
        (libc::SYS_mknod, 1, None),
    ]);
    calls
}

fn build() -> Vec<libc::sock_filter> {
    let deny = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    let no_such_call = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
    let allow = libc::SECCOMP_RET_ALLOW;
    let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    let equal = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
    let has = libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K;
    let mut program = vec![
        statement(load, 4), // arch
        jump(equal, ARCH, 1, 0),
        answer(no_such_call),
        statement(load, 0), // nr
    ];
    #[cfg(target_arch = "x86_64")]
    program.extend([
        jump(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K, X32_BIT, 0, 1),
        answer(no_such_call),
    ]);
    program.extend([
        jump(equal, libc::SYS_openat2 as u32, 0, 1),
        answer(no_such_call),
    ]);
    for (number, mode, flags) in calls() {
        match flags {
            Some(flags) => program.extend([
                jump(equal, number as u32, 0, 6),
                argument(flags),
                jump(has, CREATING, 0, 3),
                argument(mode),
                jump(has, SET_ID, 0, 1),
                answer(deny),
                answer(allow),
            ]),
            None => program.extend([
                jump(equal, number as u32, 0, 4),
                argument(mode),
                jump(has, SET_ID, 0, 1),
                answer(deny),
                answer(allow),
            ]),
        }
    }
    program.push(answer(allow));
    program
}

//! Starting a process for the agent ([`Program`]) and the handle the daemon keeps of it
//! ([`AgentProcess`]): its pid (the leader of its own process group), its pipes, and its
//! end, waited for through a pidfd. Every process the agent starts comes from here, confined
//! or not ([`super::Sandbox::spawn`]); the child side is [`super::enter`].

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use super::enter::{self, Start};

/// A program to start, as `std::process::Command` would describe it (the parts the
/// gateway uses). Its standard output and error are always pipes; its input a pipe or
/// `/dev/null`.
#[derive(Debug, Clone)]
pub struct Program {
    program: OsString,
    args: Vec<OsString>,
    cwd: Option<PathBuf>,
    /// Start from an empty environment instead of the daemon's.
    clear_env: bool,
    /// Variables set (`Some`) or removed (`None`), in order.
    env: Vec<(OsString, Option<OsString>)>,
    piped_stdin: bool,
}

impl Program {
    pub fn new(program: impl AsRef<OsStr>) -> Program {
        Program {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            cwd: None,
            clear_env: false,
            env: Vec::new(),
            piped_stdin: false,
        }
    }

    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Program {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(&mut self, args: I) -> &mut Program
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Program {
        self.cwd = Some(dir.as_ref().to_path_buf());
        self
    }

    pub fn env_clear(&mut self) -> &mut Program {
        self.clear_env = true;
        self.env.clear();
        self
    }

    pub fn env(&mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Program {
        self.env
            .push((name.as_ref().to_owned(), Some(value.as_ref().to_owned())));
        self
    }

    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Program
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self.env(k, v);
        }
        self
    }

    pub fn env_remove(&mut self, name: impl AsRef<OsStr>) -> &mut Program {
        self.env.push((name.as_ref().to_owned(), None));
        self
    }

    /// Give the process a pipe for its standard input (else `/dev/null`).
    pub fn piped_stdin(&mut self, piped: bool) -> &mut Program {
        self.piped_stdin = piped;
        self
    }

    /// The environment the process gets.
    fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut vars: Vec<(OsString, OsString)> = if self.clear_env {
            Vec::new()
        } else {
            std::env::vars_os().collect()
        };
        for (name, value) in &self.env {
            vars.retain(|(n, _)| n != name);
            if let Some(value) = value {
                vars.push((name.clone(), value.clone()));
            }
        }
        vars
    }

    /// The program's path: as given when it names one, else found on the `PATH` it
    /// will have (or the daemon's).
    fn resolve(&self, env: &[(OsString, OsString)]) -> io::Result<PathBuf> {
        let program = Path::new(&self.program);
        if self.program.as_bytes().contains(&b'/') {
            return Ok(program.to_path_buf());
        }
        let path = env
            .iter()
            .find(|(n, _)| n == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var_os("PATH"))
            .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| is_executable(candidate))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{} was not found on the PATH", program.display()),
                )
            })
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// How a process is started: in a jail (its pidfd and namespaces), or not; with which
/// restrictions.
pub(super) struct Confining {
    pub jail: Option<(RawFd, libc::c_int)>,
    pub drop_groups: bool,
    pub ruleset: Option<RawFd>,
    /// No seccomp, no `no_new_privs`, no Landlock, capabilities kept: unconfined.
    pub restricted: bool,
}

/// A process the agent started: the daemon's child, leader of its own process group.
pub struct AgentProcess {
    pid: libc::pid_t,
    /// Readable once the process ended.
    pidfd: AsyncFd<OwnedFd>,
    pub stdin: Option<pipe::Sender>,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
    /// How it ended, once reaped.
    status: Option<ExitStatus>,
    /// Killed (its group) when dropped before it ended.
    kill_on_drop: bool,
    /// What it runs in (a jail is held open while the process runs).
    _held: super::Sandbox,
}

impl std::fmt::Debug for AgentProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentProcess")
            .field("pid", &self.pid)
            .field("status", &self.status)
            .finish()
    }
}

/// `fd`, watched by the runtime.
fn watched(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the descriptor is owned and handed over whole.
    unsafe { AsyncFd::register(fd) }.map_err(|e| io::Error::other(e.to_string()))
}

impl AgentProcess {
    /// Its pid, which is also its process group's id.
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Wait until it ends, and reap it.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_reap()? {
                return Ok(status);
            }
            let mut ready = self.pidfd.readable().await?;
            ready.clear_ready();
        }
    }

    fn try_reap(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let mut raw = 0;
        // SAFETY: waitpid on our own child, not blocking.
        match unsafe { libc::waitpid(self.pid, &mut raw, libc::WNOHANG) } {
            0 => Ok(None),
            -1 => Err(io::Error::last_os_error()),
            _ => {
                let status = ExitStatus::from_raw(raw);
                self.status = Some(status);
                Ok(Some(status))
            }
        }
    }

    /// SIGKILL to its whole group.
    pub fn start_kill(&mut self) {
        if self.status.is_none() {
            // SAFETY: a signal to our own child's group.
            unsafe { libc::killpg(self.pid, libc::SIGKILL) };
        }
    }

    /// Its output and how it ended (for short commands).
    pub async fn output(mut self) -> io::Result<std::process::Output> {
        use tokio::io::AsyncReadExt;
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let (out, err) = (self.stdout.take(), self.stderr.take());
        let read_out = async {
            if let Some(mut out) = out {
                out.read_to_end(&mut stdout).await?;
            }
            io::Result::Ok(())
        };
        let read_err = async {
            if let Some(mut err) = err {
                err.read_to_end(&mut stderr).await?;
            }
            io::Result::Ok(())
        };
        let (a, b, status) = tokio::join!(read_out, read_err, self.wait());
        a?;
        b?;
        Ok(std::process::Output {
            status: status?,
            stdout,
            stderr,
        })
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if self.kill_on_drop {
            self.start_kill();
        }
        if matches!(self.try_reap(), Ok(Some(_)) | Err(_)) {
            return;
        }
        // Not ended yet: reaped when it does (killed above, that is at once).
        let pid = self.pid;
        let Ok(fd) = self.pidfd.get_ref().try_clone() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Ok(fd) = watched(fd) {
                    let _ = fd.readable().await;
                }
                // SAFETY: waitpid on our own child.
                unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
            });
        }
    }
}

fn cstring(bytes: impl Into<Vec<u8>>) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::other("a NUL byte in a program's argument"))
}

fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two descriptors just made.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Start `program` as `confining` says; `env_changes` are applied on top of the program's
/// own (the sandbox's: doors removed, the agent's `$HOME`).
pub(super) fn start(
    program: &Program,
    env_changes: &[(OsString, Option<OsString>)],
    confining: &Confining,
    held: super::Sandbox,
) -> io::Result<AgentProcess> {
    let program = with_changes(program, env_changes);
    let env = program.environment();
    let path = program.resolve(&env)?;
    let cwd = working_directory(&program)?;
    let (strings, argc) = c_strings(&program, &env)?;
    let (argv, envp) = pointer_arrays(&strings, argc);
    let pipes = Pipes::open(program.piped_stdin)?;

    let mut start = Start {
        path: cstring(path.into_os_string().into_vec())?,
        argv,
        envp,
        _strings: strings,
        cwd: cstring(cwd.into_os_string().into_vec())?,
        stdio: pipes.stdio(),
        jail: confining.jail,
        drop_groups: confining.drop_groups,
        ruleset: confining.ruleset,
        filter: confining.restricted.then(super::seccomp::filter),
        command_stack: std::ptr::null_mut(),
        pid: 0,
        errno: 0,
        step: "",
    };
    let pid = clone_children(&mut start)?;
    let pidfd = open_pidfd(pid)?;
    pipes.into_process(pid, pidfd, held)
}

/// A copy of `program` with `env_changes` applied on top of its own variables.
fn with_changes(program: &Program, env_changes: &[(OsString, Option<OsString>)]) -> Program {
    let mut program = program.clone();
    for (name, value) in env_changes {
        match value {
            Some(value) => program.env(name, value),
            None => program.env_remove(name),
        };
    }
    program
}

/// Where `program` works: its own directory, else the daemon's.
fn working_directory(program: &Program) -> io::Result<PathBuf> {
    let cwd = match &program.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    // The working directory is checked here (inside a jail it is taken again).
    if !cwd.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} is not a directory", cwd.display()),
        ));
    }
    Ok(cwd)
}

/// The program's name and arguments, then `env` as `NAME=value`, as C strings; with how
/// many of them are the name and arguments.
fn c_strings(program: &Program, env: &[(OsString, OsString)]) -> io::Result<(Vec<CString>, usize)> {
    let mut strings = Vec::new();
    strings.push(cstring(program.program.clone().into_vec())?);
    for arg in &program.args {
        strings.push(cstring(arg.clone().into_vec())?);
    }
    let argc = strings.len();
    for (name, value) in env {
        let mut pair = name.clone().into_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        strings.push(cstring(pair)?);
    }
    Ok((strings, argc))
}

/// `argv` and `envp`: NULL-ended arrays of pointers into `strings` (the first `argc` are
/// the arguments). The pointers stay good while the strings live, wherever the vector
/// holding them is moved (each string's bytes are a heap allocation of their own).
fn pointer_arrays(
    strings: &[CString],
    argc: usize,
) -> (Vec<*const libc::c_char>, Vec<*const libc::c_char>) {
    let mut argv: Vec<*const libc::c_char> = strings[..argc].iter().map(|s| s.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = strings[argc..].iter().map(|s| s.as_ptr()).collect();
    envp.push(std::ptr::null());
    (argv, envp)
}

/// A pidfd of our child `pid`; the child is killed and reaped when none can be had.
fn open_pidfd(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open(2) on our own child; the descriptor is owned from here.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) };
    if pidfd < 0 {
        let error = io::Error::last_os_error();
        // SAFETY: a signal to, and reaping of, our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        return Err(error);
    }
    // SAFETY: a descriptor just returned by the kernel.
    Ok(unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) })
}

/// A process's standard streams: `/dev/null`, and a pipe (read end, write end) for each
/// stream that has one. Kept until the process has started, so the child's ends stay open
/// while it takes them.
struct Pipes {
    null: std::fs::File,
    stdin: Option<(OwnedFd, OwnedFd)>,
    stdout: (OwnedFd, OwnedFd),
    stderr: (OwnedFd, OwnedFd),
}

impl Pipes {
    /// `/dev/null` and the pipes: one for standard input when `piped_stdin`, one each for
    /// standard output and error.
    fn open(piped_stdin: bool) -> io::Result<Pipes> {
        let null = std::fs::File::options()
            .read(true)
            .write(true)
            .open("/dev/null")?;
        let stdin = if piped_stdin {
            Some(pipe_pair()?)
        } else {
            None
        };
        let stdout = pipe_pair()?;
        let stderr = pipe_pair()?;
        Ok(Pipes {
            null,
            stdin,
            stdout,
            stderr,
        })
    }

    /// The descriptors that become the child's 0, 1 and 2.
    fn stdio(&self) -> [RawFd; 3] {
        [
            self.stdin
                .as_ref()
                .map_or(self.null.as_raw_fd(), |(read, _)| read.as_raw_fd()),
            self.stdout.1.as_raw_fd(),
            self.stderr.1.as_raw_fd(),
        ]
    }

    /// The handle of the started process `pid`, with the daemon's ends of the pipes (the
    /// child's are closed here).
    fn into_process(
        self,
        pid: libc::pid_t,
        pidfd: OwnedFd,
        held: super::Sandbox,
    ) -> io::Result<AgentProcess> {
        let into_receiver = |fd: OwnedFd| pipe::Receiver::from_owned_fd(fd);
        Ok(AgentProcess {
            pid,
            pidfd: watched(pidfd)?,
            stdin: match self.stdin {
                Some((_, write)) => Some(pipe::Sender::from_owned_fd(write)?),
                None => None,
            },
            stdout: Some(into_receiver(self.stdout.0)?),
            stderr: Some(into_receiver(self.stderr.0)?),
            status: None,
            kill_on_drop: true,
            _held: held,
        })
    }
}

/// Bytes of stack for each child (they make system calls only).
const STACK: usize = 256 * 1024;

/// Run the children (see [`enter`]); returns the command's pid once it has `exec`ed.
fn clone_children(start: &mut Start) -> io::Result<libc::pid_t> {
    // One mapping for both children's stacks (they run one after the other, each while the
    // one before waits).
    // SAFETY: an anonymous private mapping, unmapped below.
    let stacks = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            2 * STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stacks == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // Stacks grow down: each child starts at the top of its half.
    // SAFETY: both offsets are within the mapping.
    let (first_top, command_top) = unsafe {
        (
            stacks.cast::<u8>().add(STACK),
            stacks.cast::<u8>().add(2 * STACK),
        )
    };
    start.command_stack = command_top.cast();

    // No signal handler of the daemon's may run in a child on borrowed memory: every signal
    // is blocked until the child has reset them.
    // SAFETY: signal masks of this thread, restored below.
    let mut previous = unsafe { std::mem::zeroed::<libc::sigset_t>() };
    unsafe {
        let mut all = std::mem::zeroed::<libc::sigset_t>();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
    }
    let arg = (start as *mut Start).cast::<libc::c_void>();
    // SAFETY: clone with a stack of its own; CLONE_VFORK returns once the child has
    // exec'ed or exited, so `start` and the stacks outlive it.
    let first = unsafe {
        if start.jail.is_some() {
            libc::clone(
                enter::joiner,
                first_top.cast(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                arg,
            )
        } else {
            libc::clone(
                enter::command,
                first_top.cast(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                arg,
            )
        }
    };
    let clone_error = io::Error::last_os_error();
    // SAFETY: the mask saved above; the stacks are no longer in use.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
        libc::munmap(stacks, 2 * STACK);
    }
    if first < 0 {
        return Err(clone_error);
    }
    let command = if start.jail.is_some() {
        // The joiner has ended: reap it. The command (if made) is our child too.
        // SAFETY: waitpid on our own child.
        unsafe { libc::waitpid(first, std::ptr::null_mut(), 0) };
        start.pid
    } else {
        first
    };
    if start.errno != 0 {
        if command > 0 {
            // SAFETY: reaping our own child, which failed before exec.
            unsafe { libc::waitpid(command, std::ptr::null_mut(), 0) };
        }
        let error = io::Error::from_raw_os_error(start.errno);
        return Err(io::Error::new(
            error.kind(),
            format!("{} ({})", error, start.step),
        ));
    }
    Ok(command)
}

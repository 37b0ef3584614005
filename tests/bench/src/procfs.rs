//! What the bench reads about the daemon from outside: resident memory and peak
//! (`/proc/<pid>/status`), CPU time (`/proc/<pid>/stat`), and the clock tick that CPU time
//! is counted in. Also the machine description printed with the figures.

use std::time::Duration;

/// `VmRSS` (and its parts: the heap and stacks, the binary's and libraries' pages),
/// `VmHWM` and `Threads` of a process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub rss_kib: u64,
    pub anon_kib: u64,
    pub file_kib: u64,
    pub hwm_kib: u64,
    pub threads: u64,
}

pub fn memory(pid: u32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
    };
    Some(Memory {
        rss_kib: field("VmRSS")?,
        anon_kib: field("RssAnon").unwrap_or(0),
        file_kib: field("RssFile").unwrap_or(0),
        hwm_kib: field("VmHWM")?,
        threads: field("Threads").unwrap_or(0),
    })
}

/// Clock ticks per second for `/proc/<pid>/stat` times.
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as u64 } else { 100 }
}

/// User + system CPU time of a process, all threads, living and exited.
pub fn cpu_time(pid: u32, ticks_per_second: u64) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces:
    // state is field 3 (index 0 here), utime field 14, stime field 15.
    let rest = stat.rsplit_once(") ")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_secs_f64(
        (utime + stime) as f64 / ticks_per_second as f64,
    ))
}

/// CPU time of this (the bench's) process, for telling how much the fakes themselves cost.
pub fn own_cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct we pass and touches nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// CPU count, CPU model and kernel release.
pub fn machine() -> (usize, String, String) {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|k| k.trim().to_owned())
        .unwrap_or_default();
    (cpus, model, kernel)
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

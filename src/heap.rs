//! Giving freed memory back to the system (glibc's `malloc_trim`); nothing elsewhere.

/// Return the free pages of the allocator's arenas to the system, where the allocator
/// keeps them (glibc); elsewhere, nothing to do.
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases free memory; it takes the arenas' own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

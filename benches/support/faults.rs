//! Page faults as the kernel counts them for the calling thread.

/// This thread's minor page faults so far.
pub fn minor_faults() -> i64 {
    // SAFETY: `getrusage` writes only the struct it is given, which is zeroed plain data.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut u);
        u.ru_minflt
    }
}

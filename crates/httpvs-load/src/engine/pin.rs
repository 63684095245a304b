//! Pins a worker thread to one CPU, so compare can keep load and server on separate cores.

/// Pins the calling thread to `cpu`; a CPU that does not exist is ignored (the OS refuses it).
pub fn pin_current_thread(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write within it, and
    // sched_setaffinity(0, ...) applies to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        if cpu < libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

//! The one poison-tolerant lock: a panic on a guest thread must not take every later request
//! down with it, and every value behind our mutexes stays valid between statements.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, taking the value over from a thread that panicked while holding it.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// SPDX-License-Identifier: GPL-2.0

//! Room in a vector that lives behind a lock, made without allocating while the lock is held.
//!
//! Some of nvrs's locks are on the `nvidia_p2p_get_pages()` path; allocating under them would
//! make pinning wait on memory reclaim. [`lock_with_room`] takes the lock, and if the vector is
//! full, drops it, allocates a larger vector, and tries again, moving the elements over under
//! the lock (which cannot fail: the room was allocated beforehand).

use core::ops::DerefMut;

use kernel::prelude::*;

/// Returns the guard from `lock` once the vector `vec` selects in it has room for one more
/// element (`len() < capacity()`).
pub(crate) fn lock_with_room<T, G: DerefMut>(
    lock: impl Fn() -> G,
    vec: impl Fn(&mut G) -> &mut KVec<T>,
) -> Result<G> {
    let mut spare: Option<KVec<T>> = None;
    loop {
        let mut guard = lock();
        let v = vec(&mut guard);
        if v.len() < v.capacity() {
            return Ok(guard);
        }
        if let Some(mut bigger) = spare.take() {
            if bigger.capacity() > v.len() {
                for x in v.drain_all() {
                    // Room was checked above.
                    let _ = bigger.push_within_capacity(x);
                }
                *v = bigger;
                return Ok(guard);
            }
        }
        let want = v.len() * 2 + 1;
        drop(guard);
        spare = Some(KVec::with_capacity(want, GFP_KERNEL)?);
    }
}

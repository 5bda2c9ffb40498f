// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `nvrs_task`: the id nvrs records as the process that made an allocation, against
//! C.
//!
//! `helpers::current_tgid()` is the C helper `nvrs_current_tgid()` (`task_tgid_nr(current)`).
//! The `kernel` crate's `Task::tgid()` would do without it, but it reads `task_struct::tgid`
//! through the bindgen layout of a structure this GCC-built kernel laid out itself, and this
//! suite, run with `Task::tgid()` in its place, failed on the test kernel
//! (`Expected task.tgid() == c_tgid to be true, but is false`). C's `task_tgid_nr_ns()` reaches
//! the id another way (the task's thread-group `struct pid`), so a helper or accessor that
//! reads the wrong field shows as a mismatch here.

use kernel::prelude::*;

#[kunit_tests(nvrs_task)]
mod tests {
    use kernel::bindings;

    #[test]
    fn current_tgid_is_the_process_id() {
        let task = kernel::current!();
        // SAFETY: `task` is the running task; a null namespace means its active one.
        let c_tgid = unsafe { bindings::task_tgid_nr_ns(task.as_ptr(), core::ptr::null_mut()) };
        assert!(c_tgid > 0);
        assert_eq!(crate::helpers::current_tgid(), c_tgid);
    }
}

//! Catching a panic without the default report on stderr, for the callers that turn a
//! caught panic into an error or a fallback the user can act on: sled on a damaged
//! database, the MIME parser on a message it cannot read.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

thread_local! {
    /// Set while this thread runs [`catch_quietly`]'s closure.
    static QUIET_PANICS: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, catching a panic in it, and keeps that panic's message and backtrace off
/// stderr: the caller reports the failure in words the user can act on. The panic hook
/// is the process's, so the one installed here stays quiet only on a thread inside this
/// call and hands every other panic to the hook it replaced.
pub(crate) fn catch_quietly<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET_PANICS.with(Cell::get) {
                tracing::debug!("caught: {info}");
            } else {
                previous(info);
            }
        }));
    });
    let was = QUIET_PANICS.with(|q| q.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    QUIET_PANICS.with(|q| q.set(was));
    result
}

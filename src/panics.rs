//! Panics: logged where they happen, and caught where a library may panic on a client's bytes.
//!
//! The server installs [`install_hook`] at start: every panic is logged through tracing, inside
//! the span of the request being served on that thread (so with its request id), besides the
//! default line on standard error. [`catch`] runs code that may panic on malformed input (the
//! arrow crates' readers assert on some of it) and turns a panic into an error message, logged
//! at debug only: such a panic is the client's bad input, not the server's fault.

use std::{any::Any, cell::Cell, panic::AssertUnwindSafe};

thread_local! {
    /// Set while [`catch`] runs: its panics are expected and not logged as failures.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// The text a panic carried, if it carried text.
pub fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

/// Logs every panic through tracing and then as the default hook does; a panic inside
/// [`catch`] only at debug.
pub fn install_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = panic_message(info.payload());
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if CATCHING.with(Cell::get) {
            tracing::debug!(message, location, "panic on a client's input, caught");
            return;
        }
        let thread = std::thread::current();
        tracing::error!(
            message,
            location,
            thread = thread.name().unwrap_or("unnamed"),
            "panic"
        );
        default(info);
    }));
}

/// Runs `work`, turning a panic in it into `Err` with the panic's message. For code that reads
/// a client's bytes with a library that may assert on them; nothing `work` touches outlives
/// it, so no state is left half-changed.
pub fn catch<T>(work: impl FnOnce() -> T) -> Result<T, String> {
    let was = CATCHING.with(|c| c.replace(true));
    let result = std::panic::catch_unwind(AssertUnwindSafe(work));
    CATCHING.with(|c| c.set(was));
    result.map_err(|panic| panic_message(panic.as_ref()).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::panic)]
    fn a_panic_becomes_its_message() {
        assert_eq!(catch(|| 7), Ok(7));
        assert_eq!(
            catch(|| -> u8 { panic!("bad {}", "input") }),
            Err("bad input".to_owned())
        );
        assert!(!CATCHING.with(Cell::get));
    }
}

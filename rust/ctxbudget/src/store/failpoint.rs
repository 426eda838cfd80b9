//! Fault injection for the store's crash-safety tests (feature `failpoints`).
//!
//! Each write step of the store calls [`hit`] with the name of the point it reached.
//! Tests arm a point with an action: fail with an OS error (ENOSPC, EIO), run a function
//! (another program acting at that moment), or simulate a crash, which aborts the
//! operation and leaves the files exactly as they are at that point (optionally after
//! writing only a prefix of the batch). Without the feature the calls compile to nothing.

/// What an armed fail point does.
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
pub enum Fault {
    /// Return this raw OS error (e.g. `libc` ENOSPC = 28, EIO = 5).
    Error(i32),
    /// Stop here as if the process died: the operation returns
    /// [`std::io::ErrorKind::Interrupted`] and the store instance must not be used again.
    Crash,
    /// At `append.write`: write only this many bytes of the batch, then crash.
    Torn(usize),
    /// Run this function, then carry on: what another program does at that moment.
    Run(fn()),
}

#[cfg(feature = "failpoints")]
mod imp {
    use super::Fault;
    use std::collections::HashMap;
    use std::sync::Mutex;

    static POINTS: Mutex<Option<HashMap<String, Fault>>> = Mutex::new(None);

    /// Arms `name`; it fires once.
    pub fn arm(name: &str, action: Fault) {
        let mut points = POINTS.lock().unwrap_or_else(|e| e.into_inner());
        points
            .get_or_insert_with(HashMap::new)
            .insert(name.to_owned(), action);
    }

    /// Disarms every point.
    pub fn reset() {
        *POINTS.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    pub(crate) fn take(name: &str) -> Option<Fault> {
        let mut points = POINTS.lock().unwrap_or_else(|e| e.into_inner());
        points.as_mut().and_then(|p| p.remove(name))
    }
}

#[cfg(feature = "failpoints")]
pub use imp::{arm, reset};

/// The action armed at `name`, consuming it.
#[inline]
pub(crate) fn take(_name: &str) -> Option<Fault> {
    #[cfg(feature = "failpoints")]
    {
        imp::take(_name)
    }
    #[cfg(not(feature = "failpoints"))]
    {
        None
    }
}

/// Fires `name` if armed: an injected error or a simulated crash.
#[inline]
pub(crate) fn hit(name: &str) -> std::io::Result<()> {
    match take(name) {
        None | Some(Fault::Torn(_)) => Ok(()),
        Some(Fault::Run(f)) => {
            f();
            Ok(())
        }
        Some(Fault::Error(code)) => Err(std::io::Error::from_raw_os_error(code)),
        Some(Fault::Crash) => Err(crashed(name)),
    }
}

pub(crate) fn crashed(name: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        format!("simulated crash at fail point {name}"),
    )
}

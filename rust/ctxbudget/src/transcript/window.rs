//! Window IDs: `w:0` for the first window, `w:<seq>` for the window its boundary row
//! (at that seq) opened.

use std::fmt;
use std::str::FromStr;

/// The ID of a context window: the seq of the boundary row that opened it (0 for the
/// first window). Displayed and parsed as `w:N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct WindowId(pub u64);

impl WindowId {
    /// The first window of a transcript, `w:0`.
    pub const ROOT: WindowId = WindowId(0);

    /// The seq of the boundary row that opened this window (0 for `w:0`).
    pub const fn seq(self) -> u64 {
        self.0
    }
}

impl fmt::Display for WindowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "w:{}", self.0)
    }
}

/// Text that is not a window ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a window ID: expected \"w:\" and a seq, like \"w:0\" or \"w:17\"")]
pub struct WindowIdError {
    /// The text given.
    pub text: String,
}

impl FromStr for WindowId {
    type Err = WindowIdError;
    fn from_str(s: &str) -> Result<WindowId, WindowIdError> {
        s.strip_prefix("w:")
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse().ok())
            .map(WindowId)
            .ok_or_else(|| WindowIdError { text: s.to_owned() })
    }
}

impl From<WindowId> for String {
    fn from(w: WindowId) -> String {
        w.to_string()
    }
}

impl PartialEq<str> for WindowId {
    fn eq(&self, other: &str) -> bool {
        other.parse::<WindowId>().is_ok_and(|w| w == *self)
    }
}

impl PartialEq<&str> for WindowId {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_and_parses() {
        assert_eq!(WindowId(17).to_string(), "w:17");
        assert_eq!("w:0".parse::<WindowId>(), Ok(WindowId::ROOT));
        for bad in [
            "",
            "w:",
            "w:-1",
            "w:+1",
            "x:1",
            "w:1a",
            "w:99999999999999999999",
        ] {
            let err = bad.parse::<WindowId>().err().map(|e| e.to_string());
            assert!(err.is_some_and(|e| e.contains("not a window ID")), "{bad}");
        }
    }
}

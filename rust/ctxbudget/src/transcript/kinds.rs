//! The vocabulary of transcript rows: kinds, roles, part types and boundary kinds.
//! Every other module names these through the enums here, never through literals.

use std::fmt;
use std::str::FromStr;

/// A name that is not one of an enum's spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {value:?} is not one of {expected}")]
pub struct UnknownName {
    /// What was being parsed (`kind`, `role`, `part type`, `boundary kind`).
    pub what: &'static str,
    /// The text given.
    pub value: String,
    /// The accepted spellings, comma-separated.
    pub expected: String,
}

macro_rules! names {
    ($(#[$doc:meta])* $name:ident, $what:literal, $all:ident { $($(#[$vdoc:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        /// Every spelling, in declaration order.
        pub const $all: &[&str] = &[$($text),+];

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The spelling stored in rows.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownName;
            fn from_str(s: &str) -> Result<$name, UnknownName> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(UnknownName {
                        what: $what,
                        value: other.to_owned(),
                        expected: $all.join(", "),
                    }),
                }
            }
        }
    };
}

names!(
    /// What a row is (SPEC §5).
    RowKind, "kind", KINDS {
        /// A user, assistant or tool message.
        Message = "message",
        /// Opens a window: a rollover, or a reset (soft clear, the privacy floor).
        Boundary = "boundary",
        /// The first user row of a rolled-over window.
        LeadIn = "lead_in",
        /// A budget advisory (warning, handoff, final prompt).
        Advisory = "advisory",
        /// "Continue" after a rollover that had no user message to carry.
        Continuation = "continuation",
        /// A quarantined request, kept in `meta.rejected`; never sent.
        Rejected = "rejected",
        /// Hides an earlier row (`meta.retracts`).
        Retraction = "retraction",
    }
);

names!(
    /// Who a row speaks for.
    Role, "role", ROLES {
        /// The user (or the library speaking as the user: lead-ins, advisories).
        User = "user",
        /// The model.
        Assistant = "assistant",
        /// Structural rows.
        System = "system",
        /// Tool results.
        Tool = "tool",
    }
);

names!(
    /// Type of one content part.
    PartType, "part type", PART_TYPES {
        /// `{"type": "text", "text": …}`.
        Text = "text",
        /// `{"type": "tool_call", "id": …, "name": …, "arguments": …}`.
        ToolCall = "tool_call",
        /// `{"type": "tool_result", "call_id": …, "output": …}`.
        ToolResult = "tool_result",
        /// `{"type": "media", "media_type": …}`.
        Media = "media",
    }
);

names!(
    /// How a boundary row opened its window.
    BoundaryKind, "boundary kind", BOUNDARY_KINDS {
        /// The budget (or the model through `new_context`) sealed the previous window.
        Rollover = "rollover",
        /// A soft clear: a privacy floor nothing before may be retrieved across.
        Reset = "reset",
    }
);

names!(
    /// Why a window was rolled over.
    RolloverReason, "rollover reason", ROLLOVER_REASONS {
        /// The projected request reached the usable limit.
        UsableLimit = "usable_limit",
        /// The model called `new_context`.
        NewContext = "new_context",
        /// The host asked for it.
        Manual = "manual",
    }
);

impl RowKind {
    /// Rows a provider request carries (when not retracted): messages, lead-ins,
    /// advisories and continuations. Boundaries, retractions and quarantined rows are
    /// structure, never sent.
    pub const fn is_context(self) -> bool {
        matches!(
            self,
            RowKind::Message | RowKind::LeadIn | RowKind::Advisory | RowKind::Continuation
        )
    }

    /// Rows `session_history` returns as items and window listings count: messages and
    /// continuations.
    pub const fn is_item(self) -> bool {
        matches!(self, RowKind::Message | RowKind::Continuation)
    }

    /// Rows that may trigger a rollover (carried into the new window in its batch).
    pub const fn can_trigger(self) -> bool {
        self.is_item()
    }
}

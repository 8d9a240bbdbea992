//! The names of timeline files (SEMANTICS.md §1.2–§1.3): actions, states, and the grammar (of
//! either layout) that turns a file name into an [`InstantFile`] and back.

use crate::instant_time::{is_instant_time, InstantTime};
use crate::table::Layout;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    Commit,
    DeltaCommit,
    ReplaceCommit,
    Clustering,
    Compaction,
    LogCompaction,
    Clean,
    Rollback,
    Savepoint,
    Restore,
    Indexing,
    SchemaCommit,
}

impl Action {
    pub const ALL: [Action; 12] = [
        Action::Commit,
        Action::DeltaCommit,
        Action::ReplaceCommit,
        Action::Clustering,
        Action::Compaction,
        Action::LogCompaction,
        Action::Clean,
        Action::Rollback,
        Action::Savepoint,
        Action::Restore,
        Action::Indexing,
        Action::SchemaCommit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Action::Commit => "commit",
            Action::DeltaCommit => "deltacommit",
            Action::ReplaceCommit => "replacecommit",
            Action::Clustering => "clustering",
            Action::Compaction => "compaction",
            Action::LogCompaction => "logcompaction",
            Action::Clean => "clean",
            Action::Rollback => "rollback",
            Action::Savepoint => "savepoint",
            Action::Restore => "restore",
            Action::Indexing => "indexing",
            Action::SchemaCommit => "schemacommit",
        }
    }

    pub fn from_name(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == s)
    }

    /// The action a pending action completes as (compaction → commit, ...).
    pub fn completes_as(self) -> Action {
        match self {
            Action::Compaction => Action::Commit,
            Action::LogCompaction => Action::DeltaCommit,
            Action::Clustering => Action::ReplaceCommit,
            a => a,
        }
    }

    /// Whether a completed instant of this action can make data files visible.
    pub fn is_write(self) -> bool {
        matches!(
            self.completes_as(),
            Action::Commit | Action::DeltaCommit | Action::ReplaceCommit
        )
    }

    /// Actions that are planned first and complete as another action.
    pub fn is_planned(self) -> bool {
        matches!(
            self,
            Action::Compaction | Action::LogCompaction | Action::Clustering
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Requested,
    Inflight,
    Completed,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Requested => "requested",
            State::Inflight => "inflight",
            State::Completed => "completed",
        }
    }
}

/// One file of the timeline, parsed from its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstantFile {
    pub requested: InstantTime,
    /// Completion time (layout 2 completed files only).
    pub completion: Option<InstantTime>,
    pub action: Action,
    pub state: State,
    pub name: String,
}

/// Parse a timeline file name by the grammar of the given layout. Names outside the grammar
/// (including a layout-2 name in a layout-1 timeline and a completed layout-2 name without
/// completion time) give `None`.
pub fn parse_instant_file_name(name: &str, layout: Layout) -> Option<InstantFile> {
    let mut parts = name.split('.');
    let stamp = parts.next()?;
    let second = parts.next()?;
    let third = parts.next();
    if parts.next().is_some() {
        return None;
    }
    let (requested, completion) = match stamp.split_once('_') {
        Some((r, c)) if layout == Layout::V2 && is_instant_time(r) && is_instant_time(c) => {
            (r, Some(c))
        }
        Some(_) => return None,
        None if is_instant_time(stamp) => (stamp, None),
        None => return None,
    };
    let (action, state) = match (second, third) {
        // The legacy inflight spelling of a commit has no action word.
        ("inflight", None) => (Action::Commit, State::Inflight),
        (a, None) => (Action::from_name(a)?, State::Completed),
        (a, Some("requested")) => (Action::from_name(a)?, State::Requested),
        (a, Some("inflight")) => (Action::from_name(a)?, State::Inflight),
        _ => return None,
    };
    match state {
        State::Completed => {
            if action.is_planned() || layout.has_completion_times() != completion.is_some() {
                return None;
            }
        }
        _ => {
            if completion.is_some() {
                return None;
            }
        }
    }
    Some(InstantFile {
        requested: InstantTime::parse(requested)?,
        completion: completion.and_then(InstantTime::parse),
        action,
        state,
        name: name.to_string(),
    })
}

/// Format a timeline file name (used by the table generator).
pub fn instant_file_name(
    requested: &str,
    completion: Option<&str>,
    action: Action,
    state: State,
    layout: Layout,
) -> String {
    match state {
        State::Requested => format!("{requested}.{}.requested", action.name()),
        State::Inflight if action == Action::Commit => format!("{requested}.inflight"),
        State::Inflight => format!("{requested}.{}.inflight", action.name()),
        State::Completed => {
            let action = action.completes_as();
            match (layout, completion) {
                (Layout::V2, Some(c)) => format!("{requested}_{c}.{}", action.name()),
                (Layout::V2, None) => format!("{requested}_{requested}.{}", action.name()),
                (Layout::V1, _) => format!("{requested}.{}", action.name()),
            }
        }
    }
}

/// Whether a name that failed the grammar still looks like it was meant as an instant file
/// (starts with a digit), so that it deserves a log line.
pub fn looks_like_instant(name: &str) -> bool {
    name.as_bytes().first().is_some_and(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_both_layouts() {
        let f = parse_instant_file_name("20250126040823628.deltacommit", Layout::V1).unwrap();
        assert_eq!((f.action, f.state), (Action::DeltaCommit, State::Completed));
        let f = parse_instant_file_name("20250713010535797.inflight", Layout::V1).unwrap();
        assert_eq!((f.action, f.state), (Action::Commit, State::Inflight));
        let f = parse_instant_file_name(
            "20260307162614221_20260307162615208.replacecommit",
            Layout::V2,
        )
        .unwrap();
        assert_eq!(
            f.completion.as_deref(),
            Some("20260307162615208"),
            "completion time from the name"
        );
        assert_eq!(f.requested, "20260307162614221");
        let f =
            parse_instant_file_name("20251220210129235.compaction.requested", Layout::V2).unwrap();
        assert_eq!((f.action, f.state), (Action::Compaction, State::Requested));
        for (bad, layout) in [
            (
                "20260307162614221_20260307162615208.replacecommit",
                Layout::V1,
            ),
            ("20260307162614221.replacecommit", Layout::V2),
            ("20260307162614221.compaction", Layout::V1),
            ("20260307162614221.frobnicate", Layout::V1),
            ("hoodie.properties", Layout::V1),
            ("2026x.commit", Layout::V1),
            ("20260307162614221.commit.crc", Layout::V1),
            ("20260307162614221_1.commit.requested", Layout::V2),
            (".20260307162614221.commit", Layout::V1),
            ("", Layout::V1),
        ] {
            assert_eq!(parse_instant_file_name(bad, layout), None, "{bad}");
        }
    }

    #[test]
    fn names_round_trip() {
        for layout in [Layout::V1, Layout::V2] {
            for action in Action::ALL {
                for state in [State::Requested, State::Inflight, State::Completed] {
                    let name = instant_file_name(
                        "20240101000000000",
                        Some("20240101000000123"),
                        action,
                        state,
                        layout,
                    );
                    let f =
                        parse_instant_file_name(&name, layout).unwrap_or_else(|| panic!("{name}"));
                    assert_eq!(f.requested, "20240101000000000");
                    assert_eq!(f.state, state);
                    if state == State::Completed {
                        assert_eq!(f.action, action.completes_as());
                    } else {
                        assert_eq!(f.action, action);
                    }
                }
            }
        }
    }
}

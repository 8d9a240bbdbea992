//! [`Instant`]: every file of one requested time and one action family, as a value.
//!
//! An instant never reads its own files: `metadata::InstantMetadata` decodes them through the
//! storage and keeps what it decoded in the instant's memo cells, so that every timeline sharing
//! the instant (instant files never change once written) shares the decoding too.

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::grammar::{Action, InstantFile, State};
use crate::instant_time::InstantTime;
use crate::metadata::{CommitMetadata, MetadataError};
use crate::table::Layout;

/// Decoded metadata of one instant file, or why it could not be decoded.
pub type Decoded<T> = Result<Arc<T>, MetadataError>;

/// Decoded metadata kept with an instant (filled by `metadata::InstantMetadata`).
#[derive(Debug, Default)]
pub struct Memo {
    pub(crate) commit: OnceLock<Decoded<CommitMetadata>>,
    pub(crate) json: OnceLock<Decoded<Value>>,
    pub(crate) plan: OnceLock<Decoded<Value>>,
}

/// Key of an instant: its requested time and action family (a savepoint shares its time with
/// the commit it pins, so the time alone is not a key).
pub type InstantKey = (InstantTime, Action);

/// One instant: every file of one requested time and one action family.
#[derive(Debug)]
pub struct Instant {
    pub requested: InstantTime,
    /// Layout 2: from the completed file name. Layout 1: the requested time (SEMANTICS.md
    /// §1.4).
    pub completion: Option<InstantTime>,
    /// The action of the completed file, or of the pending files.
    pub action: Action,
    /// The action the plan was requested as (compaction, clustering, logcompaction) if any.
    pub planned: Option<Action>,
    pub state: State,
    /// All files of this instant, in state order.
    pub files: Vec<InstantFile>,
    pub(crate) memo: Memo,
}

impl Instant {
    /// The instant made of `files`, all of one requested time and action family.
    pub fn from_files(
        requested: InstantTime,
        family: Action,
        mut files: Vec<InstantFile>,
        layout: Layout,
    ) -> Instant {
        files.sort_by_key(|f| f.state);
        let state = files.last().map(|f| f.state).unwrap_or(State::Requested);
        let completed = files.iter().find(|f| f.state == State::Completed);
        let planned = files.iter().map(|f| f.action).find(|a| a.is_planned());
        let action = match completed {
            Some(c) => c.action,
            None => planned.unwrap_or(family),
        };
        let completion = match completed {
            Some(c) if layout.has_completion_times() => c.completion.clone(),
            Some(_) => Some(requested.clone()),
            None => None,
        };
        Instant {
            requested,
            completion,
            action,
            planned,
            state,
            files,
            memo: Memo::default(),
        }
    }

    pub fn key(&self) -> InstantKey {
        (self.requested.clone(), self.action.completes_as())
    }

    pub fn is_completed(&self) -> bool {
        self.state == State::Completed
    }

    /// Completed commit, deltacommit or replacecommit.
    pub fn is_completed_write(&self) -> bool {
        self.is_completed() && self.action.is_write()
    }

    pub fn file(&self, state: State) -> Option<&InstantFile> {
        self.files.iter().find(|f| f.state == state)
    }

    /// The file of the most advanced state (the completed file of a completed instant).
    pub fn last_file(&self) -> Option<&InstantFile> {
        self.files.last()
    }

    /// Completion time, or the requested time where there is none (layout 1, archived).
    pub fn completion_or_requested(&self) -> &InstantTime {
        self.completion.as_ref().unwrap_or(&self.requested)
    }

    /// Whether the commit metadata was decoded already (it is decoded on first use).
    pub fn metadata_decoded(&self) -> bool {
        self.memo.commit.get().is_some()
    }
}

//! A table snapshot: its configuration, active timeline and data-file listing, read together.
//! Views are resolved against one snapshot, so one answer never mixes two states of the table.

use std::path::Path;
use std::sync::Arc;

use crate::error::Result;
use crate::fsview::Context;
use crate::listing::{self, Listing};
use crate::table::TableConfig;
use crate::timeline::Timeline;

pub struct TableSnapshot {
    pub cfg: Arc<TableConfig>,
    pub timeline: Arc<Timeline>,
    pub listing: Listing,
}

impl TableSnapshot {
    /// Read the table at `root`. The timeline is read before the listing, so every data file a
    /// completed instant names is already on disk when it is listed.
    pub fn open(root: &Path) -> Result<TableSnapshot> {
        let cfg = TableConfig::load(root)?;
        let timeline = Timeline::load(&cfg)?;
        let listing = listing::list_table(&cfg)?;
        Ok(TableSnapshot {
            cfg: Arc::new(cfg),
            timeline: Arc::new(timeline),
            listing,
        })
    }

    pub fn context(&self) -> Context {
        Context::new(self.cfg.clone(), self.timeline.clone())
    }
}

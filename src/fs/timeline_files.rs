//! `timeline/`: every instant file of the active timeline as a read-only file of pretty JSON
//! (0.x JSON and 1.x Avro metadata alike), rendered on first use and cached while the file's
//! size and modification time stay the same (SEMANTICS.md §2.5). On an object store, where
//! asking costs a request per file, size and time come from the timeline's last listing (the
//! follower lists it at every poll, §9), so a listing of `timeline/` costs no request once each
//! file was read.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use hudifs_core::error::{Error, Result};
use hudifs_core::metadata::{self, DecodeError, MetadataError};
use lru::LruCache;

use super::HudiFs;
use hudifs_storage::sync::lock;

/// Rendered timeline files kept.
const RENDER_CACHE: usize = 1024;

/// A timeline file as rendered: its name, length and mtime in the storage.
type RenderKey = (String, u64, Option<SystemTime>);

/// The timeline files rendered lately, by name, size and time of the instant file.
pub(super) struct Rendered(Mutex<LruCache<RenderKey, Arc<Vec<u8>>>>);

impl Default for Rendered {
    fn default() -> Self {
        Rendered(Mutex::new(LruCache::new(
            NonZeroUsize::new(RENDER_CACHE).unwrap_or(NonZeroUsize::MIN),
        )))
    }
}

impl Rendered {
    fn get(&self, key: &RenderKey) -> Option<Arc<Vec<u8>>> {
        lock(&self.0).get(key).cloned()
    }

    fn put(&self, key: RenderKey, bytes: Arc<Vec<u8>>) {
        lock(&self.0).put(key, bytes);
    }
}

impl HudiFs {
    /// The name of interned timeline file `id`.
    pub(super) fn timeline_name(&self, id: u32) -> Result<Arc<str>> {
        self.inodes
            .timeline_names
            .get(id)
            .ok_or_else(|| Error::NotFound(format!("timeline file {id}")))
    }

    /// The instant file `name` decoded to pretty JSON, and its modification time.
    pub(super) fn render_timeline_file(
        &self,
        name: &str,
    ) -> Result<(Arc<Vec<u8>>, Option<SystemTime>)> {
        let dir = self.snapshot().cfg.timeline_dir.clone();
        let path = dir
            .child(name)
            .map_err(|e| Error::NotFound(e.to_string()))?;
        let md = match self.store.known_meta(&path) {
            Some(md) => md,
            None => self
                .store
                .stat(&path)
                .map_err(|e| Error::io(self.store.describe(&path), e))?,
        };
        let key = (name.to_string(), md.size, md.mtime);
        if let Some(b) = self.rendered.get(&key) {
            return Ok((b, md.mtime));
        }
        let bytes = self
            .store
            .read(&path)
            .map_err(|e| Error::io(self.store.describe(&path), e))?;
        let bad = |error| {
            Error::BadMetadata(MetadataError {
                file: self.store.describe(&path),
                error,
            })
        };
        let json = metadata::decode(&bytes).map_err(bad)?;
        let mut out =
            serde_json::to_vec_pretty(&json).map_err(|e| bad(DecodeError::Shape(e.to_string())))?;
        out.push(b'\n');
        let out = Arc::new(out);
        self.rendered.put(key, out.clone());
        Ok((out, md.mtime))
    }
}

//! [`FaultyStore`]: a wrapper that injects failures, latency and short reads into another
//! storage, by operation and path, a given number of times or with a given probability
//! (seeded, so a test is repeatable), and counts the calls it saw.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[cfg(any(test, feature = "write"))]
use crate::StorageWrite;
use crate::{Entry, Meta, OpenFile, Storage, TablePath};

/// The operations a fault can target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    List,
    Stat,
    Read,
    ReadRange,
    Open,
    /// A read on a handle returned by `open`.
    ReadAt,
    /// Any [`StorageWrite`] call.
    Write,
}

const OPS: usize = 7;

impl Op {
    fn index(self) -> usize {
        self as usize
    }
}

/// What goes wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The call fails with this kind of error.
    Error(io::ErrorKind),
    /// The call waits this long first.
    Latency(Duration),
    /// A read returns only part of what it should (a truncated response body); other calls are
    /// not affected.
    ShortRead,
}

/// When a fault applies.
#[derive(Debug, Clone)]
pub struct Rule {
    fault: Fault,
    ops: Vec<Op>,
    path_contains: Option<String>,
    remaining: Option<u64>,
    probability: f64,
}

impl Rule {
    /// `fault` on every call of every operation (narrow it with the other methods).
    pub fn new(fault: Fault) -> Rule {
        Rule {
            fault,
            ops: Vec::new(),
            path_contains: None,
            remaining: None,
            probability: 1.0,
        }
    }
    /// Only on these operations.
    pub fn on(mut self, ops: &[Op]) -> Rule {
        self.ops = ops.to_vec();
        self
    }
    /// Only on paths containing `s`.
    pub fn matching(mut self, s: &str) -> Rule {
        self.path_contains = Some(s.to_string());
        self
    }
    /// At most `n` times.
    pub fn times(mut self, n: u64) -> Rule {
        self.remaining = Some(n);
        self
    }
    /// On each matching call with probability `p`.
    pub fn probability(mut self, p: f64) -> Rule {
        self.probability = p;
        self
    }
}

struct State {
    rules: Vec<Rule>,
    rng: u64,
    calls: [u64; OPS],
    injected: u64,
}

/// A storage that fails on purpose.
pub struct FaultyStore<S: ?Sized> {
    inner: Arc<S>,
    state: Arc<Mutex<State>>,
}

impl<S: ?Sized> std::fmt::Debug for FaultyStore<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FaultyStore")
    }
}

impl<S: Storage + ?Sized> FaultyStore<S> {
    /// Wrap `inner`; `seed` fixes the sequence of probabilistic faults.
    pub fn new(inner: Arc<S>, seed: u64) -> FaultyStore<S> {
        FaultyStore {
            inner,
            state: Arc::new(Mutex::new(State {
                rules: Vec::new(),
                rng: seed ^ 0x9e37_79b9_7f4a_7c15,
                calls: [0; OPS],
                injected: 0,
            })),
        }
    }

    /// Add a fault rule (rules are tried in the order added; every matching one applies).
    pub fn add(&self, rule: Rule) {
        self.lock().rules.push(rule);
    }

    /// Remove every rule.
    pub fn clear(&self) {
        self.lock().rules.clear();
    }

    /// How many calls of `op` reached this wrapper.
    pub fn calls(&self, op: Op) -> u64 {
        self.lock().calls[op.index()]
    }

    /// How many faults were injected.
    pub fn injected(&self) -> u64 {
        self.lock().injected
    }

    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Count the call and decide its faults: (sleep, error, short read).
fn decide(state: &Mutex<State>, op: Op, path: &str) -> (Duration, Option<io::ErrorKind>, bool) {
    let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
    st.calls[op.index()] += 1;
    let (mut sleep, mut error, mut short) = (Duration::ZERO, None, false);
    let mut injected = 0;
    let mut rng = st.rng;
    for rule in st.rules.iter_mut() {
        if (!rule.ops.is_empty() && !rule.ops.contains(&op))
            || rule
                .path_contains
                .as_deref()
                .is_some_and(|s| !path.contains(s))
            || rule.remaining == Some(0)
        {
            continue;
        }
        if rule.probability < 1.0 {
            // SplitMix64.
            rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            if (z >> 11) as f64 / (1u64 << 53) as f64 >= rule.probability {
                continue;
            }
        }
        let applies = match &rule.fault {
            Fault::Latency(d) => {
                sleep += *d;
                true
            }
            Fault::Error(kind) => {
                error.get_or_insert(*kind);
                true
            }
            Fault::ShortRead if matches!(op, Op::Read | Op::ReadRange | Op::ReadAt) => {
                short = true;
                true
            }
            Fault::ShortRead => false,
        };
        if applies {
            if let Some(n) = rule.remaining.as_mut() {
                *n -= 1;
            }
            if !matches!(rule.fault, Fault::Latency(_)) {
                injected += 1;
            }
        }
    }
    st.rng = rng;
    st.injected += injected;
    (sleep, error, short)
}

fn enter(state: &Mutex<State>, op: Op, path: &str) -> io::Result<bool> {
    let (sleep, error, short) = decide(state, op, path);
    if !sleep.is_zero() {
        std::thread::sleep(sleep);
    }
    match error {
        Some(kind) => Err(io::Error::new(
            kind,
            format!("injected fault on {op:?} of {path}"),
        )),
        None => Ok(short),
    }
}

fn shorten(mut bytes: Vec<u8>, short: bool) -> Vec<u8> {
    if short && !bytes.is_empty() {
        bytes.truncate(bytes.len() / 2);
    }
    bytes
}

struct FaultyFile {
    inner: Arc<dyn OpenFile>,
    state: Arc<Mutex<State>>,
    path: String,
}

impl OpenFile for FaultyFile {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let short = enter(&self.state, Op::ReadAt, &self.path)?;
        let want = if short { buf.len() / 2 } else { buf.len() };
        self.inner.read_at(&mut buf[..want], offset)
    }
    // Passthrough would bypass the faults: never offered.
}

impl<S: Storage + ?Sized> Storage for FaultyStore<S> {
    fn describe(&self, path: &TablePath) -> String {
        self.inner.describe(path)
    }
    fn is_object_store(&self) -> bool {
        self.inner.is_object_store()
    }
    fn run_blocking(&self, job: crate::Job) {
        self.inner.run_blocking(job)
    }
    fn list(&self, dir: &TablePath) -> io::Result<Vec<Entry>> {
        enter(&self.state, Op::List, dir.as_str())?;
        self.inner.list(dir)
    }
    fn list_names(&self, dir: &TablePath) -> io::Result<Vec<(String, crate::Kind)>> {
        enter(&self.state, Op::List, dir.as_str())?;
        self.inner.list_names(dir)
    }
    fn known_meta(&self, path: &TablePath) -> Option<Meta> {
        self.inner.known_meta(path)
    }
    fn list_tree(
        &self,
        dir: &TablePath,
        skip: &str,
        go_on: &dyn Fn(crate::TreeProgress) -> bool,
    ) -> Option<Vec<(String, Meta)>> {
        // A fault makes the caller list directory by directory, as a failed tree listing does.
        enter(&self.state, Op::List, dir.as_str()).ok()?;
        self.inner.list_tree(dir, skip, go_on)
    }
    fn stat(&self, path: &TablePath) -> io::Result<Meta> {
        enter(&self.state, Op::Stat, path.as_str())?;
        self.inner.stat(path)
    }
    fn read(&self, path: &TablePath) -> io::Result<Vec<u8>> {
        let short = enter(&self.state, Op::Read, path.as_str())?;
        Ok(shorten(self.inner.read(path)?, short))
    }
    fn read_range(&self, path: &TablePath, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let short = enter(&self.state, Op::ReadRange, path.as_str())?;
        Ok(shorten(self.inner.read_range(path, offset, len)?, short))
    }
    fn open(&self, path: &TablePath) -> io::Result<Arc<dyn OpenFile>> {
        enter(&self.state, Op::Open, path.as_str())?;
        Ok(Arc::new(FaultyFile {
            inner: self.inner.open(path)?,
            state: self.state.clone(),
            path: path.as_str().to_string(),
        }))
    }
    // `local()` stays `None`: inotify and passthrough would bypass the faults.
}

#[cfg(any(test, feature = "write"))]
impl<S: StorageWrite + ?Sized> StorageWrite for FaultyStore<S> {
    fn put(&self, path: &TablePath, bytes: &[u8]) -> io::Result<()> {
        enter(&self.state, Op::Write, path.as_str())?;
        self.inner.put(path, bytes)
    }
    fn put_atomic(&self, path: &TablePath, bytes: &[u8], staging: &TablePath) -> io::Result<()> {
        enter(&self.state, Op::Write, path.as_str())?;
        self.inner.put_atomic(path, bytes, staging)
    }
    fn rename(&self, from: &TablePath, to: &TablePath) -> io::Result<()> {
        enter(&self.state, Op::Write, to.as_str())?;
        self.inner.rename(from, to)
    }
    fn delete(&self, path: &TablePath) -> io::Result<bool> {
        enter(&self.state, Op::Write, path.as_str())?;
        self.inner.delete(path)
    }
    fn delete_dir_all(&self, dir: &TablePath) -> io::Result<()> {
        enter(&self.state, Op::Write, dir.as_str())?;
        self.inner.delete_dir_all(dir)
    }
    fn create_dir_all(&self, dir: &TablePath) -> io::Result<()> {
        enter(&self.state, Op::Write, dir.as_str())?;
        self.inner.create_dir_all(dir)
    }
    fn truncate(&self, path: &TablePath, len: u64) -> io::Result<()> {
        enter(&self.state, Op::Write, path.as_str())?;
        self.inner.truncate(path, len)
    }
    fn link_or_copy(&self, from: &TablePath, to: &TablePath) -> io::Result<()> {
        enter(&self.state, Op::Write, to.as_str())?;
        self.inner.link_or_copy(from, to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemStore;

    #[test]
    fn faults_by_operation_path_count_and_probability() {
        let mem = Arc::new(MemStore::new("t"));
        let p = TablePath::new("d/f").unwrap();
        mem.put(&p, b"0123456789").unwrap();
        let s = FaultyStore::new(mem, 7);
        s.add(
            Rule::new(Fault::Error(io::ErrorKind::TimedOut))
                .on(&[Op::Read])
                .matching("d/")
                .times(2),
        );
        assert!(s.read(&p).is_err());
        assert!(s.read(&p).is_err());
        assert_eq!(s.read(&p).unwrap(), b"0123456789");
        assert_eq!(s.calls(Op::Read), 3);
        s.clear();
        s.add(Rule::new(Fault::ShortRead).on(&[Op::ReadAt]));
        let f = s.open(&p).unwrap();
        let mut buf = [0u8; 10];
        assert_eq!(f.read_at(&mut buf, 0).unwrap(), 5);
        s.clear();
        s.add(Rule::new(Fault::Error(io::ErrorKind::Other)).probability(0.5));
        let failures = (0..1000).filter(|_| s.stat(&p).is_err()).count();
        assert!((400..600).contains(&failures), "{failures}");
        assert_eq!(s.injected(), 2 + 1 + failures as u64);
    }
}

use std::collections::BTreeMap;

use super::memlog::HEADER;
use super::*;

fn dir(s: &str) -> Record {
    Record::Dir(s.into())
}

fn open(fh: u64, ino: u64, backing_id: u32) -> Record {
    Record::PassOpen(PassOpen {
        fh,
        ino,
        backing_id,
    })
}

fn release(fh: u64) -> Record {
    Record::PassRelease { fh }
}

/// The bytes of `records` as the log holds them.
fn stream(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        frame(&mut out, r.tag(), &r.payload());
    }
    out
}

/// Bytes written at the end of the journal as they are (a torn record, garbage).
fn raw_append(j: &RestartJournal, bytes: &[u8]) {
    j.lock().log.append_raw(bytes);
}

/// A checkpoint record holding `records`.
fn checkpoint(records: &[Record]) -> Vec<u8> {
    let mut rec = Vec::new();
    frame(&mut rec, 11, &stream(records));
    rec
}

#[test]
fn records_come_back_in_order_and_a_torn_tail_is_cut() {
    let j = RestartJournal::create().unwrap();
    let merged = Record::MergedSlice {
        partition: "".into(),
        name: "m.parquet".into(),
    };
    j.append(&dir("p1"));
    j.append(&merged);
    j.append(&Record::TimelineName("x.commit".into()));
    let got = j.records().unwrap();
    assert_eq!(
        got,
        vec![dir("p1"), merged, Record::TimelineName("x.commit".into())]
    );
    // A record whose payload never arrived (the daemon died inside its write).
    raw_append(&j, &[dir("").tag(), 9, 0, 0, 0, b'a']);
    assert_eq!(j.records().unwrap().len(), 3);
    // Cut, so the next record follows the last whole one.
    j.append(&dir("p2"));
    let got = j.records().unwrap();
    assert_eq!(got.len(), 4);
    assert_eq!(got[3], dir("p2"));
    // Garbage (an unknown tag) ends the journal rather than being misread.
    raw_append(&j, &[200, 0, 0, 0, 0]);
    assert_eq!(j.records().unwrap().len(), 4);
}

#[test]
fn a_whole_record_that_does_not_read_as_its_kind_is_an_error() {
    let j = RestartJournal::create().unwrap();
    j.append(&dir("p1"));
    // A passthrough open of 3 bytes, not 24.
    let mut rec = Vec::new();
    frame(&mut rec, open(0, 0, 0).tag(), &[1, 2, 3]);
    raw_append(&j, &rec);
    let e = j.records().unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert!(e.to_string().contains("PassOpen"), "{e}");
}

/// What replay makes of `records`: the other records in order, the passthrough handles open.
type Replayed = (Vec<Record>, BTreeMap<u64, (u64, u32)>);

fn replayed(records: &[Record]) -> Replayed {
    let other = records
        .iter()
        .filter(|r| !is_passthrough(r.tag()))
        .cloned()
        .collect();
    let open = open_passthrough(records)
        .into_iter()
        .map(|o| (o.open.fh, (o.open.ino, o.open.backing_id)))
        .collect();
    (other, open)
}

/// The journal as another process reads it (the daemon that takes over).
fn reopened(j: &RestartJournal) -> RestartJournal {
    // SAFETY: dup of a descriptor we hold; the result is checked and owned by the journal.
    let fd = unsafe { libc::dup(j.raw_fd()) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor nothing else owns.
    unsafe { RestartJournal::from_raw_fd(fd) }
}

fn start(j: &RestartJournal) -> u64 {
    j.lock().log.start()
}

#[test]
fn records_survive_checkpoints() {
    let j = RestartJournal::create().unwrap();
    j.set_compact_after(10);
    let config = Record::TableConfig([("k".to_string(), "v".to_string())].into());
    j.append(&config);
    let mut all = vec![config];
    let mut push = |r: Record| {
        j.append(&r);
        all.push(r);
    };
    for fh in 0..100u64 {
        push(open(fh, 1000 + fh % 7, (fh % 7) as u32));
        if fh % 10 == 3 {
            push(dir(&format!("d{fh}")));
        }
        // Every third handle stays open.
        if fh % 3 != 0 {
            push(release(fh));
        }
    }
    assert!(start(&j) > HEADER, "compacted");
    let got = j.records().unwrap();
    assert_eq!(replayed(&got), replayed(&all));
    assert_eq!(open_passthrough(&got).len(), 34);
    assert!(got.len() < all.len());
    assert_eq!(replayed(&reopened(&j).records().unwrap()), replayed(&all));
    // Appends after a reading go on from the checkpoint.
    j.append(&release(0));
    all.push(release(0));
    assert_eq!(replayed(&reopened(&j).records().unwrap()), replayed(&all));
}

#[test]
fn a_torn_checkpoint_falls_back_to_the_records_before_it() {
    let j = RestartJournal::create().unwrap();
    j.append(&dir("p1"));
    j.append(&open(1, 2, 3));
    j.append(&open(2, 2, 3));
    j.append(&release(1));
    let before = j.records().unwrap();
    // A checkpoint whose write stopped halfway.
    let rec = checkpoint(&[dir("p1"), open(2, 2, 3)]);
    raw_append(&j, &rec[..rec.len() - 4]);
    assert_eq!(reopened(&j).records().unwrap(), before);
    // Cut: the next record follows the last whole one.
    j.append(&dir("p2"));
    let got = j.records().unwrap();
    assert_eq!(got.len(), 5);
    assert_eq!(got[4], dir("p2"));
}

#[test]
fn a_checkpoint_the_header_does_not_point_at_yet_is_read() {
    let j = RestartJournal::create().unwrap();
    j.append(&dir("p1"));
    j.append(&dir("gone"));
    j.append(&open(1, 2, 3));
    // The daemon died after appending the checkpoint, before moving the start to it. (This
    // checkpoint leaves out a record to show that what precedes it is superseded.)
    raw_append(&j, &checkpoint(&[dir("p1"), open(1, 2, 3)]));
    j.append(&release(1));
    j.append(&dir("p3"));
    assert_eq!(start(&j), HEADER);
    let want = vec![dir("p1"), open(1, 2, 3), release(1), dir("p3")];
    assert_eq!(reopened(&j).records().unwrap(), want);
    // The last checkpoint counts: another one after it, pointed at this time.
    j.set_compact_after(0);
    j.append(&open(5, 6, 7));
    for _ in 0..20 {
        if start(&j) > HEADER {
            break;
        }
        // Releases of no handle: dropped by the compaction they bring about.
        j.append(&release(99));
    }
    assert!(start(&j) > HEADER);
    assert_eq!(
        reopened(&j).records().unwrap(),
        vec![dir("p1"), dir("p3"), open(5, 6, 7)]
    );
}

#[test]
fn compaction_frees_the_memory_of_what_it_dropped() {
    let held = |j: &RestartJournal| j.lock().log.held().unwrap();
    let n = 200_000u64;
    let mut sizes = Vec::new();
    for compact_after in [u64::MAX / 8, COMPACT_AFTER] {
        let j = RestartJournal::create().unwrap();
        j.set_compact_after(compact_after);
        j.append(&Record::TableConfig(
            [("k".to_string(), "v".repeat(10_000))].into(),
        ));
        for fh in 0..3 {
            j.append(&open(fh, 10 + fh, fh as u32));
        }
        for fh in 3..n {
            j.append(&open(fh, 10, 0));
            j.append(&release(fh));
        }
        let got = reopened(&j).records().unwrap();
        let (other, open) = replayed(&got);
        assert_eq!((other.len(), open.len()), (1, 3));
        if compact_after == COMPACT_AFTER {
            assert!(
                got.len() < (COMPACT_AFTER as usize + 20) * 2,
                "{}",
                got.len()
            );
        } else {
            assert_eq!(got.len(), 4 + 2 * (n - 3) as usize);
        }
        assert_eq!(open_passthrough(&got).len(), 3);
        sizes.push(held(&j));
    }
    let ((len0, held0), (len1, held1)) = (sizes[0], sizes[1]);
    eprintln!(
        "{n} opens and releases: {len0} bytes held {held0} without compaction; {len1} bytes \
         held {held1} with it"
    );
    assert!(held0 >= len0 - 4096 && held0 > 8 << 20, "{held0}");
    // At most the records since the last compaction and the live state stay.
    assert!(held1 < (COMPACT_AFTER + 16) * 29 + (64 << 10), "{held1}");
    assert!(len1 > held1 * 3, "{len1} {held1}");
}

#[derive(Debug, Clone)]
enum Op {
    Open(u64, u64),
    Release(u64),
    Other(u8),
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0..20u64, 0..5u64).prop_map(|(fh, ino)| Op::Open(fh, ino)),
        4 => (0..20u64).prop_map(Op::Release),
        1 => any::<u8>().prop_map(Op::Other),
    ]
}

proptest::proptest! {
    #[test]
    fn replay_after_compactions_matches_a_model(
        ops in proptest::collection::vec(op(), 0..300),
        compact_after in 0..20u64,
        read_at in 0..300usize,
    ) {
        let j = RestartJournal::create().unwrap();
        j.set_compact_after(compact_after);
        let mut other = Vec::new();
        let mut live = BTreeMap::new();
        for (i, op) in ops.iter().enumerate() {
            if i == read_at {
                // A daemon that took over reads, then appends.
                let got = j.records().unwrap();
                proptest::prop_assert_eq!(replayed(&got), (other.clone(), live.clone()));
            }
            match *op {
                Op::Open(fh, ino) => {
                    j.append(&open(fh, ino, ino as u32 + 1));
                    live.insert(fh, (ino, ino as u32 + 1));
                }
                Op::Release(fh) => {
                    j.append(&release(fh));
                    live.remove(&fh);
                }
                Op::Other(b) => {
                    j.append(&dir(&b.to_string()));
                    other.push(dir(&b.to_string()));
                }
            }
        }
        let got = reopened(&j).records().unwrap();
        proptest::prop_assert_eq!(replayed(&got), (other, live));
    }
}

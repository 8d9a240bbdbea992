//! The writer: roundtrips through the reader (every codec, multi-level indexes, a model
//! checked by proptest), the block layout of Java Hudi's writer reproduced on the fixtures'
//! HFiles, and hostile mutations of written files.

use std::collections::BTreeMap;
use std::io::Read;

use hudifs_hfile::writer::{self, Options, Writer};
use hudifs_hfile::{raw, Codec, HFileError, HFileReader, Limits};
use proptest::prelude::*;

type Cells = Vec<(Vec<u8>, Vec<u8>)>;

fn scan(bytes: &[u8]) -> Result<Cells, HFileError> {
    HFileReader::open(bytes)?.scan().collect()
}

fn sample(n: usize, value_len: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    (0..n)
        .map(|i| {
            let key = format!("key-{:06}", i * 7).into_bytes();
            let value = (0..value_len + i % 13)
                .map(|j| (i * 31 + j) as u8)
                .collect();
            (key, value)
        })
        .collect()
}

fn check_against(bytes: &[u8], model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let r = HFileReader::open(bytes).unwrap();
    let cells = r.scan().collect::<Result<Cells, _>>().unwrap();
    let want: Cells = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(cells, want);
    assert_eq!(r.entry_count(), model.len() as u64);
    for (k, v) in model {
        assert_eq!(r.get(k).unwrap().as_ref(), Some(v));
    }
    for probe in [&b""[..], b"key-", b"key-000001", b"zz", b"\xff\xff"] {
        assert_eq!(
            r.get(probe).unwrap().as_ref(),
            model.get(probe),
            "{probe:?}"
        );
    }
    let keys: Vec<&Vec<u8>> = model.keys().rev().collect();
    let many = r.get_many(&keys).unwrap();
    assert!(many
        .iter()
        .zip(&keys)
        .all(|(v, k)| v.as_ref() == model.get(*k)));
    for prefix in [&b"key-00"[..], b"key-0001", b"key-", b"", b"nope"] {
        let got = r.scan_prefix(prefix).collect::<Result<Cells, _>>().unwrap();
        let want: Cells = model
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(got, want, "prefix {prefix:?}");
    }
}

#[test]
fn roundtrips_with_every_codec_and_many_blocks() {
    let model = sample(3000, 40);
    for codec in [Codec::None, Codec::Gzip, Codec::Snappy] {
        for block_size in [1, 300, 4096, 64 * 1024] {
            let bytes = writer::write(
                &model,
                Options {
                    codec,
                    block_size,
                    ..Options::default()
                },
            )
            .unwrap();
            check_against(&bytes, &model);
            let r = HFileReader::open(bytes.as_slice()).unwrap();
            assert_eq!(r.codec(), codec);
            assert_eq!(r.index_levels(), 1);
        }
    }
}

#[test]
fn roundtrips_multi_level_indexes() {
    let model = sample(400, 10);
    for fanout in [2, 3, 7, 50] {
        let bytes = writer::write(
            &model,
            Options {
                block_size: 200,
                index_fanout: Some(fanout),
                ..Options::default()
            },
        )
        .unwrap();
        let r = HFileReader::open(bytes.as_slice()).unwrap();
        assert!(r.index_levels() >= 2, "fanout {fanout}");
        check_against(&bytes, &model);
        let kinds: Vec<[u8; 8]> = raw::blocks(&bytes)
            .unwrap()
            .iter()
            .map(|b| b.header.magic)
            .collect();
        assert!(kinds.contains(b"IDXLEAF2"));
        if fanout == 2 {
            assert!(kinds.contains(b"IDXINTE2"));
        }
    }
    // Deeper than the limit: refused at open.
    let bytes = writer::write(
        &model,
        Options {
            block_size: 1,
            index_fanout: Some(2),
            ..Options::default()
        },
    )
    .unwrap();
    let deep = Limits {
        max_index_levels: 64,
        ..Limits::default()
    };
    let levels = HFileReader::open_with_limits(bytes.as_slice(), deep)
        .unwrap()
        .index_levels();
    assert!(levels > 8, "{levels} levels");
    let some: BTreeMap<_, _> = model.into_iter().take(50).collect();
    let r = HFileReader::open_with_limits(bytes.as_slice(), deep).unwrap();
    assert_eq!(r.scan().count(), 400);
    for (k, v) in &some {
        assert_eq!(r.get(k).unwrap().as_ref(), Some(v));
    }
    let limits = Limits {
        max_index_levels: levels - 1,
        ..Limits::default()
    };
    assert!(matches!(
        HFileReader::open_with_limits(bytes.as_slice(), limits),
        Err(HFileError::TooLarge(_))
    ));
}

#[test]
fn empty_files_big_values_and_repeated_keys() {
    let bytes = writer::write(Vec::<(&[u8], &[u8])>::new(), Options::default()).unwrap();
    let r = HFileReader::open(bytes.as_slice()).unwrap();
    assert_eq!(r.entry_count(), 0);
    assert_eq!(r.get(b"x").unwrap(), None);
    assert_eq!(r.scan().count(), 0);

    let big = vec![7u8; 300_000];
    let model: BTreeMap<Vec<u8>, Vec<u8>> = [
        (b"a".to_vec(), big.clone()),
        (b"b".to_vec(), b"small".to_vec()),
        (b"c".to_vec(), big),
    ]
    .into_iter()
    .collect();
    for codec in [Codec::None, Codec::Gzip, Codec::Snappy] {
        let bytes = writer::write(
            &model,
            Options {
                codec,
                block_size: 1024,
                ..Options::default()
            },
        )
        .unwrap();
        check_against(&bytes, &model);
        // A block bigger than the limit is refused, not read.
        let small = Limits {
            max_block: 100_000,
            ..Limits::default()
        };
        let r = HFileReader::open_with_limits(bytes.as_slice(), small).unwrap_or_else(|e| {
            panic!("{codec:?}: the load-on-open section is small: {e}");
        });
        assert!(r.get(b"a").is_err());
        assert_eq!(r.get(b"b").unwrap().as_deref(), Some(&b"small"[..]));
    }

    // The same key twice stays in one block; a lookup finds the first.
    let mut w = Writer::new(Options {
        block_size: 1,
        ..Options::default()
    })
    .unwrap();
    w.append(b"k", b"1").unwrap();
    w.append(b"k", b"2").unwrap();
    w.append(b"l", b"3").unwrap();
    assert!(w.append(b"a", b"out of order").is_err());
    let bytes = w.finish().unwrap();
    assert_eq!(
        HFileReader::open(bytes.as_slice())
            .unwrap()
            .get(b"k")
            .unwrap()
            .as_deref(),
        Some(&b"1"[..])
    );
    let data_blocks = raw::blocks(&bytes)
        .unwrap()
        .iter()
        .filter(|b| &b.header.magic == b"DATABLK*")
        .count();
    assert_eq!(data_blocks, 2);
}

#[test]
fn file_info_and_meta_blocks() {
    let mut w = Writer::new(Options::default()).unwrap();
    w.add_file_info("schema", "{\"type\":\"string\"}");
    w.add_meta_block("bloomFilter", vec![1u8; 5000]);
    w.append(b"only", b"one").unwrap();
    let bytes = w.finish().unwrap();
    let r = HFileReader::open(bytes.as_slice()).unwrap();
    assert_eq!(r.file_info(b"schema"), Some(&b"{\"type\":\"string\"}"[..]));
    assert_eq!(r.file_info(b"hfile.LASTKEY"), Some(&b"\x00\x04only"[..]));
    assert_eq!(r.file_info(b"KEY_VALUE_VERSION"), Some(&[0u8, 0, 0, 1][..]));
    assert_eq!(
        r.meta_block_names().collect::<Vec<_>>(),
        vec![&b"bloomFilter"[..]]
    );
    assert_eq!(r.meta_block(b"bloomFilter").unwrap(), Some(vec![1u8; 5000]));
    assert_eq!(r.meta_block(b"other").unwrap(), None);
}

/// HFiles that Java Hudi's own writer (`HFileWriterImpl`, table version 9: NULL checksums,
/// trailer version 3.0) wrote: MDT base files and HFile log blocks of some fixtures.
fn java_native_hfiles() -> Vec<(String, Vec<u8>)> {
    let Some(dir) = hudifs_testkit::fixtures::dir() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for zip_name in [
        "sample_table/cow/v9_txns_simple_meta.zip",
        "sample_table/mor/avro/v9_txns_nonpart_meta.zip",
        "quickstart_trips_table/mor/avro/table_hfile_log_block.zip",
    ] {
        let file = std::fs::File::open(dir.join("tables").join(zip_name)).unwrap();
        let mut archive = zip::ZipArchive::new(file).unwrap();
        for i in 0..archive.len() {
            let mut entry = archive.by_index(i).unwrap();
            let name = entry.name().to_string();
            let base = name.rsplit('/').next().unwrap().to_string();
            let in_files = name.contains("/.hoodie/metadata/files/");
            let data_log = !name.contains("/.hoodie/") && base.contains(".log.");
            if name.starts_with("__MACOSX") || !(in_files || data_log) {
                continue;
            }
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).unwrap();
            if base.ends_with(".hfile") {
                out.push((format!("{zip_name}:{base}"), bytes));
            } else if base.contains(".log.") {
                let (blocks, _) = hudifs_core::logblock::scan_log_blocks(&bytes);
                for b in blocks.iter().filter(|b| b.block_type == 4) {
                    out.push((
                        format!("{zip_name}:{base}@{}", b.offset),
                        b.content.to_vec(),
                    ));
                }
            }
        }
    }
    out.retain(|(_, b)| {
        let t = raw::trailer(b).unwrap();
        t.minor_version == 0 && raw::blocks(b).unwrap()[0].header.checksum_type == 0
    });
    out
}

const STANDARD_INFO: [&str; 6] = [
    "hfile.LASTKEY",
    "MAX_MEMSTORE_TS_KEY",
    "hfile.AVG_KEY_LEN",
    "hfile.AVG_VALUE_LEN",
    "hfile.CREATE_TIME_TS",
    "KEY_VALUE_VERSION",
];

/// Rewrite each Java-written HFile from what the reader gets out of it and compare the two
/// block by block: the same blocks in the same order, byte-identical uncompressed data and
/// meta payloads, the same index entries, file info and trailer fields, and the same header
/// conventions (checksum type and bytes per checksum, checksum byte counts). Compressed bytes
/// and the offsets that follow from them may differ (another deflate implementation).
#[test]
fn writes_the_layout_of_java_hudis_writer() {
    let files = java_native_hfiles();
    if files.is_empty() {
        return;
    }
    assert!(
        files.len() >= 10,
        "only {} Java-written HFiles",
        files.len()
    );
    eprintln!("comparing {} Java-written HFiles", files.len());
    for (name, java) in &files {
        let r = HFileReader::open(java.as_slice()).unwrap();
        let jt = raw::trailer(java).unwrap();
        let mut w = Writer::new(Options {
            codec: r.codec(),
            block_size: 64 * 1024,
            index_fanout: None,
            create_time_ms: i64::from_be_bytes(
                r.file_info(b"hfile.CREATE_TIME_TS")
                    .unwrap()
                    .try_into()
                    .unwrap(),
            ),
        })
        .unwrap();
        for (k, v) in r.file_info_entries() {
            if !STANDARD_INFO.contains(&String::from_utf8_lossy(k).as_ref()) {
                w.add_file_info(k.clone(), v.clone());
            }
        }
        for m in r.meta_block_names() {
            w.add_meta_block(m, r.meta_block(m).unwrap().unwrap());
        }
        for kv in r.scan() {
            let (k, v) = kv.unwrap();
            w.append(&k, &v).unwrap();
        }
        let ours = w.finish().unwrap();
        let ot = raw::trailer(&ours).unwrap();
        let (jb, ob) = (raw::blocks(java).unwrap(), raw::blocks(&ours).unwrap());
        let magics = |bs: &[raw::RawBlock]| bs.iter().map(|b| b.header.magic).collect::<Vec<_>>();
        assert_eq!(magics(&jb), magics(&ob), "{name}");
        let mut roots = 0;
        for (j, o) in jb.iter().zip(&ob) {
            let (jh, oh) = (&j.header, &o.header);
            assert_eq!(jh.checksum_type, oh.checksum_type, "{name}");
            assert_eq!(jh.bytes_per_checksum, oh.bytes_per_checksum, "{name}");
            assert_eq!(
                jh.uncompressed_size_without_header,
                oh.uncompressed_size_without_header,
                "{name} {}",
                jh.magic_str()
            );
            let checksum_bytes =
                |h: &raw::BlockHeader| h.on_disk_len() - h.on_disk_data_size_with_header;
            let expected = |h: &raw::BlockHeader| {
                h.on_disk_data_size_with_header
                    .div_ceil(h.bytes_per_checksum as usize)
                    * 4
            };
            assert_eq!(checksum_bytes(jh), expected(jh), "{name}");
            assert_eq!(checksum_bytes(oh), expected(oh), "{name}");
            match &jh.magic {
                b"DATABLK*" | b"METABLKc" => assert_eq!(j.payload, o.payload, "{name}"),
                b"IDXROOT2" => {
                    let count = if roots == 0 {
                        jt.data_index_count
                    } else {
                        jt.meta_index_count
                    } as usize;
                    let strip = |v: Vec<(Vec<u8>, u64, usize)>| {
                        v.into_iter().map(|(k, _, _)| k).collect::<Vec<_>>()
                    };
                    if roots == 0 {
                        assert_eq!(
                            strip(raw::root_index(&j.payload, count).unwrap()),
                            strip(raw::root_index(&o.payload, count).unwrap()),
                            "{name}"
                        );
                    }
                    assert_eq!(j.payload.len(), o.payload.len(), "{name}");
                    roots += 1;
                }
                b"FILEINF2" => assert_eq!(
                    raw::file_info(&j.payload).unwrap(),
                    raw::file_info(&o.payload).unwrap(),
                    "{name}"
                ),
                other => panic!("{name}: block {}", String::from_utf8_lossy(other)),
            }
        }
        assert_eq!(
            (
                ot.major_version,
                ot.minor_version,
                ot.entry_count,
                ot.data_index_count,
                ot.meta_index_count,
                ot.num_data_index_levels,
                &ot.comparator_class_name,
                ot.compression_codec,
                ot.first_data_block_offset,
            ),
            (
                jt.major_version,
                jt.minor_version,
                jt.entry_count,
                jt.data_index_count,
                jt.meta_index_count,
                jt.num_data_index_levels,
                &jt.comparator_class_name,
                jt.compression_codec,
                jt.first_data_block_offset,
            ),
            "{name}"
        );
        assert_eq!(scan(&ours).unwrap(), scan(java).unwrap(), "{name}");
    }
}

fn model_strategy() -> impl Strategy<Value = BTreeMap<Vec<u8>, Vec<u8>>> {
    proptest::collection::btree_map(
        proptest::collection::vec(
            prop_oneof![Just(b'a'), Just(b'b'), Just(0u8), Just(0xffu8)],
            0..6,
        ),
        proptest::collection::vec(any::<u8>(), 0..40),
        0..120,
    )
}

fn codec_strategy() -> impl Strategy<Value = Codec> {
    prop_oneof![Just(Codec::None), Just(Codec::Gzip), Just(Codec::Snappy)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn model_roundtrip(
        model in model_strategy(),
        codec in codec_strategy(),
        block_size in 1usize..400,
        fanout in proptest::option::of(2usize..5),
        probes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..4), 0..10),
    ) {
        let bytes = writer::write(&model, Options { codec, block_size, index_fanout: fanout, ..Options::default() }).unwrap();
        let r = HFileReader::open(bytes.as_slice()).unwrap();
        let cells = r.scan().collect::<Result<Cells, _>>().unwrap();
        let want: Cells = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        prop_assert_eq!(cells, want);
        for p in probes.iter().chain(model.keys()) {
            let got = r.get(p).unwrap();
            prop_assert_eq!(got.as_ref(), model.get(p));
            let got = r.scan_prefix(p).collect::<Result<Cells, _>>().unwrap();
            let want: Cells = model.iter().filter(|(k, _)| k.starts_with(p)).map(|(k, v)| (k.clone(), v.clone())).collect();
            prop_assert_eq!(got, want);
        }
        let many = r.get_many(&probes).unwrap();
        for (p, v) in probes.iter().zip(many) {
            prop_assert_eq!(v.as_ref(), model.get(p));
        }
    }

    /// Mutated files: an error or an answer from every call, never a panic.
    #[test]
    fn mutations_never_panic(
        model in model_strategy(),
        codec in codec_strategy(),
        fanout in proptest::option::of(2usize..4),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in proptest::option::of(any::<prop::sample::Index>()),
        splice in proptest::option::of((any::<prop::sample::Index>(), proptest::collection::vec(any::<u8>(), 1..8))),
    ) {
        let mut bytes = writer::write(&model, Options { codec, block_size: 64, index_fanout: fanout, ..Options::default() }).unwrap();
        for (at, x) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        if let Some((at, extra)) = splice {
            let i = at.index(bytes.len());
            bytes.splice(i..i, extra);
        }
        if let Some(at) = cut {
            let i = at.index(bytes.len());
            bytes.truncate(i);
        }
        if let Ok(r) = HFileReader::open(bytes.as_slice()) {
            let _ = r.scan().take(10_000).count();
            for k in model.keys().take(20) {
                let _ = r.get(k);
                let _ = r.scan_prefix(k).take(100).count();
            }
            let _ = r.get_many(&[b"a".as_slice(), b"b"]);
            let _ = r.meta_block(b"bloomFilter");
        }
        let _ = raw::blocks(&bytes);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..6000)) {
        let _ = scan(&bytes);
        let _ = raw::blocks(&bytes);
    }
}

/// A byte source that records the ranges read.
struct Counting {
    bytes: Vec<u8>,
    reads: std::sync::Mutex<Vec<(u64, usize)>>,
}

impl hudifs_hfile::RangeRead for Counting {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_at(&self, off: u64, len: usize) -> std::io::Result<Vec<u8>> {
        self.reads.lock().unwrap().push((off, len));
        self.bytes.read_at(off, len)
    }
}

/// Opening reads the trailer and the load-on-open section only; a lookup then reads one
/// block per index level below the root and the one data block; get_many reads each data
/// block it needs once.
#[test]
fn reads_only_the_ranges_a_lookup_needs() {
    use hudifs_hfile::RangeRead;
    let model = sample(2000, 30);
    for fanout in [None, Some(4)] {
        let bytes = writer::write(
            &model,
            Options {
                block_size: 1024,
                index_fanout: fanout,
                ..Options::default()
            },
        )
        .unwrap();
        let src = Counting {
            bytes,
            reads: Default::default(),
        };
        let r = HFileReader::open(&src).unwrap();
        let opened = src.reads.lock().unwrap().clone();
        assert_eq!(opened.len(), 2, "{opened:?}");
        assert_eq!(opened[0], (src.size() - 4096, 4096));
        let levels = r.index_levels() as usize;
        assert_eq!(levels > 1, fanout.is_some());
        let total: usize = src.bytes.len();
        src.reads.lock().unwrap().clear();
        let key = format!("key-{:06}", 1234 * 7).into_bytes();
        assert_eq!(r.get(&key).unwrap().as_ref(), model.get(&key));
        let reads = src.reads.lock().unwrap().clone();
        assert_eq!(reads.len(), levels, "{reads:?}");
        assert!(reads.iter().map(|r| r.1).sum::<usize>() < total / 20);

        src.reads.lock().unwrap().clear();
        let keys: Vec<Vec<u8>> = (0..5)
            .map(|i| format!("key-{:06}", (100 + i) * 7).into_bytes())
            .collect();
        let got = r.get_many(&keys).unwrap();
        assert!(got
            .iter()
            .zip(&keys)
            .all(|(v, k)| v.as_ref() == model.get(k)));
        let reads = src.reads.lock().unwrap().clone();
        let data_reads: BTreeMap<(u64, usize), usize> =
            reads.iter().fold(BTreeMap::new(), |mut m, r| {
                *m.entry(*r).or_default() += 1;
                m
            });
        // Five neighbouring keys sit in one or two data blocks.
        assert!(reads.len() <= 2 * levels, "{reads:?}");
        assert!(data_reads.len() <= 2 * levels, "{data_reads:?}");
    }
}

#!/usr/bin/env python3
"""hudi-rs side of scripts/bench figure 6 (the merged view), and its row check.

  bench-hudi-rs-read.py read TABLE OUT [OPTIONS]
                                          time hudi-rs 0.5.0 read() of the latest snapshot plus
                                          pyarrow writing those rows to OUT (one Parquet file),
                                          in this process (start-up and imports not timed);
                                          OPTIONS: hudi-rs's storage options as JSON, for a
                                          table on an object store (s3://...)
  bench-hudi-rs-read.py incr TABLE T1 T2 OUT
                                          the same for hudi-rs's incremental read of (T1, T2]
  bench-hudi-rs-read.py count DIR [T]    rows of every *.parquet file below DIR (pyarrow); with
                                          T, only those whose _hoodie_commit_time is T

Each prints one JSON object."""
import glob
import json
import os
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq

if sys.argv[1] == "read":
    from hudi import HudiTableBuilder

    table, out = sys.argv[2], sys.argv[3]
    builder = HudiTableBuilder.from_base_uri(table)
    if len(sys.argv) > 4:
        builder = builder.with_storage_options(json.loads(sys.argv[4]))
    t0 = time.perf_counter()
    batches = builder.build().read()
    t1 = time.perf_counter()
    rows = pa.Table.from_batches(batches)
    pq.write_table(rows, out)
    t2 = time.perf_counter()
    os.remove(out)
    print(json.dumps({"seconds": t2 - t0, "read_seconds": t1 - t0,
                      "write_seconds": t2 - t1, "rows": rows.num_rows}))
elif sys.argv[1] == "incr":
    from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

    table, start, end, out = sys.argv[2:6]
    t0 = time.perf_counter()
    opts = (HudiReadOptions().with_query_type(HudiQueryType.Incremental)
            .with_start_timestamp(start).with_end_timestamp(end))
    batches = HudiTableBuilder.from_base_uri(table).build().read(opts)
    rows = pa.Table.from_batches(batches)
    pq.write_table(rows, out)
    t1 = time.perf_counter()
    os.remove(out)
    print(json.dumps({"seconds": t1 - t0, "rows": rows.num_rows}))
elif sys.argv[1] == "count":
    files = sorted(glob.glob(os.path.join(sys.argv[2], "**", "*.parquet"), recursive=True))
    if len(sys.argv) > 3:
        import pyarrow.compute as pc
        n = 0
        for f in files:
            c = pq.read_table(f, columns=["_hoodie_commit_time"]).column(0)
            n += pc.sum(pc.equal(c, sys.argv[3])).as_py() or 0
    else:
        n = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    print(json.dumps({"rows": n, "files": len(files)}))
else:
    sys.exit(f"usage: {sys.argv[0]} read TABLE OUT | incr TABLE T1 T2 OUT | count DIR")

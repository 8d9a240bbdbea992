#!/usr/bin/env python3
"""hudi-rs side of scripts/bench figure 6 (the merged view), and its row check.

  bench-hudi-rs-read.py read TABLE OUT   time hudi-rs 0.5.0 read() of the latest snapshot plus
                                          pyarrow writing those rows to OUT (one Parquet file),
                                          in this process (start-up and imports not timed)
  bench-hudi-rs-read.py count DIR        rows of every *.parquet file below DIR (pyarrow)

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
    t0 = time.perf_counter()
    batches = HudiTableBuilder.from_base_uri(table).build().read()
    t1 = time.perf_counter()
    rows = pa.Table.from_batches(batches)
    pq.write_table(rows, out)
    t2 = time.perf_counter()
    os.remove(out)
    print(json.dumps({"seconds": t2 - t0, "read_seconds": t1 - t0,
                      "write_seconds": t2 - t1, "rows": rows.num_rows}))
elif sys.argv[1] == "count":
    files = sorted(glob.glob(os.path.join(sys.argv[2], "**", "*.parquet"), recursive=True))
    n = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    print(json.dumps({"rows": n, "files": len(files)}))
else:
    sys.exit(f"usage: {sys.argv[0]} read TABLE OUT | count DIR")

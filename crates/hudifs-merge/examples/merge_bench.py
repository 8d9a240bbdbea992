"""The hudi-rs side of examples/merge_bench.rs: hudi-rs 0.5.0 read() of the latest snapshot,
then pyarrow writing those rows to one Parquet file; and, for reference, pyarrow reading the
merged files hudifs-merge wrote. Usage: merge_bench.py TABLE OUT MERGED_DIR"""
import glob
import os
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
from hudi import HudiTableBuilder

table, out, merged = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(out, exist_ok=True)
t0 = time.time()
t = HudiTableBuilder.from_base_uri(table).build()
batches = t.read()
t1 = time.time()
rows = pa.Table.from_batches(batches)
pq.write_table(rows, os.path.join(out, "hudi_rs.parquet"))
t2 = time.time()
n = 0
for f in sorted(glob.glob(os.path.join(merged, "**", "*.parquet"), recursive=True)):
    n += pq.read_table(f).num_rows
t3 = time.time()
print(f"hudi-rs read: {t1 - t0:.2f} s, {rows.num_rows} rows; pyarrow write: {t2 - t1:.2f} s; "
      f"total {t2 - t0:.2f} s")
print(f"pyarrow read of the merged files: {t3 - t2:.2f} s, {n} rows")

"""Count rows of the Parquet files below each directory with DuckDB and with pyarrow.

Input (argv[1]): a JSON list of directories. Output: a JSON object
{dir: {"duckdb": n, "pyarrow": n, "files": k}}. Used by tests/mount/real_client.rs.
"""
import json
import os
import sys

import duckdb
import pyarrow.parquet as pq


def parquet_files(d):
    out = []
    for root, dirs, files in os.walk(d):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        out += [os.path.join(root, f) for f in files if f.endswith(".parquet") and not f.startswith(".")]
    return sorted(out)


result = {}
con = duckdb.connect()
for d in json.loads(sys.argv[1]):
    files = parquet_files(d)
    if files:
        n_duck = con.execute(
            "SELECT count(*) FROM read_parquet(?, hive_partitioning = false)", [files]
        ).fetchone()[0]
        # pyarrow reads every file's data, not only its footer.
        n_arrow = sum(pq.read_table(f).num_rows for f in files)
    else:
        n_duck = n_arrow = 0
    result[d] = {"duckdb": n_duck, "pyarrow": n_arrow, "files": len(files)}
print(json.dumps(result))

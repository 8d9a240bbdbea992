"""Every Parquet file's schema and (id, score) rows under each directory of the JSON list on
stdin (pyarrow), for tests/mount/merged_schema.rs: {dir: {files, schemas, names, rows}}."""
import json, sys, glob, os
import pyarrow.parquet as pq
out = {}
for d in json.load(sys.stdin):
    files = sorted(glob.glob(os.path.join(d, "**", "*.parquet"), recursive=True))
    schemas, rows = set(), []
    for f in files:
        t = pq.read_table(f)
        schemas.add(json.dumps([[x.name, str(x.type)] for x in t.schema]))
        score = t.column("score").to_pylist() if "score" in t.column_names else [None] * t.num_rows
        rows += [[i, s] for i, s in zip(t.column("id").to_pylist(), score)]
    out[d] = {"files": len(files), "schemas": [json.loads(s) for s in schemas],
              "names": [os.path.basename(f) for f in files], "rows": sorted(rows)}
print(json.dumps(out))

"""Every change-feed file's schema and records under each directory of the JSON list on stdin
(pyarrow), for tests/mount/merged_schema.rs: {dir: {files, schemas, rows}}, a row being
[op, ts_ms, id, before_score, after_score, has_before, has_after] (a score is null where the
image lacks the column or holds null)."""
import json, sys, glob, os
import pyarrow.parquet as pq


def score(img):
    return None if img is None else img.get("score")


def ident(r):
    img = r["after"] or r["before"]
    return img["id"]


out = {}
for d in json.load(sys.stdin):
    files = sorted(glob.glob(os.path.join(d, "**", "*.cdc.parquet"), recursive=True))
    schemas, rows = set(), []
    for f in files:
        t = pq.read_table(f)
        schemas.add(json.dumps([[x.name, str(x.type)] for x in t.schema]))
        for r in t.to_pylist():
            rows.append([r["op"], r["ts_ms"], ident(r), score(r["before"]), score(r["after"]),
                         r["before"] is not None, r["after"] is not None])
    out[d] = {"files": len(files), "schemas": [json.loads(s) for s in schemas],
              "rows": sorted(rows, key=json.dumps)}
print(json.dumps(out))

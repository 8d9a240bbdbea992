"""Every Parquet file's columns and chosen values under each directory (pyarrow), for
tests/mount/merged_schema.rs. Input: {"dirs": [...], "columns": [...]}. Output: {dir: {files,
schemas, rows, error}}: the distinct column lists (data files: top-level names; change feeds:
the names of the after image), and per row [id, value of each column] (null where the file lacks
the column); change feeds give [op, id, before values..., after values...]. A directory that
cannot be read gives its errno as error."""
import json, sys, glob, os
import pyarrow.parquet as pq

req = json.load(sys.stdin)
cols = req["columns"]
out = {}
for d in req["dirs"]:
    try:
        files = sorted(glob.glob(os.path.join(d, "**", "*.parquet"), recursive=True))
        schemas, rows = set(), []
        for f in files:
            t = pq.read_table(f)
            if f.endswith(".cdc.parquet"):
                after = t.schema.field("after").type
                schemas.add(json.dumps([after.field(i).name for i in range(after.num_fields)]))
                for r in t.to_pylist():
                    b, a = r["before"] or {}, r["after"] or {}
                    ident = (r["after"] or r["before"])["id"]
                    rows.append([r["op"], ident] + [b.get(c) for c in cols] + [a.get(c) for c in cols])
            else:
                schemas.add(json.dumps(t.column_names))
                data = t.to_pydict()
                for i in range(t.num_rows):
                    rows.append([data["id"][i]] + [data[c][i] if c in data else None for c in cols])
        out[d] = {"files": len(files), "schemas": [json.loads(s) for s in schemas],
                  "rows": sorted(rows, key=json.dumps)}
    except OSError as e:
        out[d] = {"error": e.errno}
print(json.dumps(out))

"""Compare merged slices with hudi-rs 0.5.0's read() of the same snapshot and with Spark's gold
data. Input (JSON on stdin): {"table": root, "gold": dir or null, "views": [{"label", "as_of"
(or null for latest), "window" (optional: [start, end], an incremental read of (start, end]
instead of a snapshot), "oracle" (optional: {"dir", "keep"}: the rows of another view's
files whose _hoodie_commit_time is in "keep", the answer the view must equal), "stringify"
(optional: columns compared as strings with hudi-rs), "same_as_dir" / "same_as_file" (optional: the
Parquet files under a folder, or one file, the view must equal; "table" null skips hudi-rs 0.5.0), "dir", "refused", "model" (optional: the rows the view must hold, as
a list of {column: value}; compared on those columns)}]}. Output: one JSON object on stdout with per-view
results; a view whose files cannot be read (a merged file the mount refuses) has "read_error"
with the errno and message instead.
"""
import datetime
import decimal
import glob
import json
import math
import os
import re
import sys
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq


def canon(v):
    if v is None:
        return None
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return repr(float(v))
    if isinstance(v, (bytes, bytearray)):
        return "b:" + bytes(v).hex()
    if isinstance(v, decimal.Decimal):
        return "d:" + str(v.normalize())
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return "t:" + v.isoformat()
    if isinstance(v, (datetime.date, datetime.time)):
        return "t:" + v.isoformat()
    if isinstance(v, dict):
        return {str(k): canon(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
    if isinstance(v, (list, tuple)):
        # pyarrow gives maps as lists of (key, value) tuples
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
            return {str(k): canon(x) for k, x in sorted(v, key=lambda kv: str(kv[0]))}
        return [canon(x) for x in v]
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v
    return str(v)


def rows(tables, columns):
    out = Counter()
    for t in tables:
        names = t.column_names
        cols = {c: t.column(c).to_pylist() if c in names else [None] * t.num_rows for c in columns}
        for i in range(t.num_rows):
            out[json.dumps([canon(cols[c][i]) for c in columns], sort_keys=True)] += 1
    return out


def read_dir(d):
    files = sorted(glob.glob(os.path.join(d, "**", "*.parquet"), recursive=True))
    return [pq.read_table(f) for f in files]


def read_delta(spec):
    """A version of a Delta table read with delta-rs (`deltalake`): its rows, and the Hudi
    instant its commitInfo names."""
    if spec.get("reader") == "polars":
        import polars as pl
        t = pl.read_delta(spec["root"], version=spec["version"]).to_arrow()
    else:
        from deltalake import DeltaTable
        t = DeltaTable(spec["root"], version=spec["version"]).to_pyarrow_table()
    log = os.path.join(spec["root"], "_delta_log", "%020d.json" % spec["version"])
    with open(log) as f:
        infos = [a["commitInfo"] for a in map(json.loads, f) if "commitInfo" in a]
    return [t], (infos[0].get("hudi.instant") if infos else None)


def read_iceberg(spec):
    """A snapshot of an Iceberg table read with pyiceberg's `StaticTable` (or polars'
    `scan_iceberg`, its native Parquet reader): its rows, and the Hudi instant its summary
    names."""
    from pyiceberg.table import StaticTable
    t = StaticTable.from_metadata(spec["metadata"])
    snap = t.snapshot_by_id(spec["snapshot_id"])
    if snap is None:
        raise KeyError("no snapshot %s" % spec["snapshot_id"])
    if spec.get("reader") == "polars":
        # Plans with pyiceberg (said once here, not warned per scan); reads with its own
        # Parquet reader.
        os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")
        import polars as pl
        got = pl.scan_iceberg(t, snapshot_id=spec["snapshot_id"]).collect().to_arrow()
    else:
        got = t.scan(snapshot_id=spec["snapshot_id"]).to_arrow()
    return [got], snap.summary.additional_properties.get("hudi.instant")


def all_null_columns(ours, theirs):
    """Columns that hold a value somewhere in `theirs` but only nulls in `ours`."""
    def valued(tables):
        out = set()
        for t in tables:
            for c in t.column_names:
                if t.column(c).null_count < t.num_rows:
                    out.add(c)
        return out
    have = set().union(*[set(t.column_names) for t in ours]) if ours else set()
    return sorted((valued(theirs) & have) - valued(ours))


def stringified(tables, columns):
    out = []
    for t in tables:
        for c in columns:
            if c in t.column_names:
                i = t.column_names.index(c)
                t = t.set_column(i, c, t.column(c).cast(pa.string()))
        out.append(t)
    return out


def compare(ours, theirs):
    ours_cols = set().union(*[set(t.column_names) for t in ours]) if ours else set()
    theirs_cols = set().union(*[set(t.column_names) for t in theirs]) if theirs else set()
    cols = sorted(ours_cols & theirs_cols) if ours and theirs else sorted(ours_cols | theirs_cols)
    a = rows(ours, cols)
    b = rows(theirs, cols)
    na, nb = sum(a.values()), sum(b.values())
    same = a == b
    res = {"rows": na, "reference_rows": nb, "match": same, "columns": len(cols)}
    if not same:
        extra = list((a - b).elements())[:3]
        missing = list((b - a).elements())[:3]
        res["extra"] = extra
        res["missing"] = missing
        res["column_names"] = cols
    return res


def main():
    req = json.load(sys.stdin)
    out = {"views": []}
    try:
        table = None
        if req.get("table") is not None:
            from hudi import HudiReadOptions, HudiTableBuilder
            table = HudiTableBuilder.from_base_uri(req["table"]).build()
    except Exception as e:  # noqa: BLE001
        table = None
        out["hudi_error"] = repr(e)[:300]
    for v in req["views"]:
        r = {"label": v["label"]}
        if v.get("refused"):
            r["refused"] = v["refused"]
        ours = None
        if not v.get("refused"):
            try:
                if v.get("delta") is not None:
                    ours, r["delta_instant"] = read_delta(v["delta"])
                elif v.get("iceberg") is not None:
                    ours, r["iceberg_instant"] = read_iceberg(v["iceberg"])
                else:
                    ours = read_dir(v["dir"])
            except Exception as e:  # noqa: BLE001
                m = re.search(r"errno (\d+)", str(e), re.I)
                r["read_error"] = {
                    "errno": getattr(e, "errno", None) or (int(m.group(1)) if m else None),
                    "error": repr(e)[:300],
                }
        if table is not None and ours is not None:
            try:
                if v.get("window") is not None:
                    from hudi import HudiQueryType
                    start, end = v["window"]
                    batches = table.read(
                        HudiReadOptions()
                        .with_query_type(HudiQueryType.Incremental)
                        .with_start_timestamp(start)
                        .with_end_timestamp(end)
                    )
                elif v["as_of"] is None:
                    batches = table.read()
                else:
                    batches = table.read(HudiReadOptions().with_as_of_timestamp(v["as_of"]))
                theirs = [pa.Table.from_batches([b]) for b in batches]
                cols = v.get("stringify") or []
                r["hudi_rs"] = compare(stringified(ours, cols), stringified(theirs, cols))
            except Exception as e:  # noqa: BLE001
                r["hudi_rs_error"] = repr(e)[:300]
        if v.get("oracle") is not None and ours is not None:
            try:
                keep = pa.array(v["oracle"]["keep"], pa.string())
                import pyarrow.compute as pc
                want = []
                skipped = 0
                pattern = os.path.join(v["oracle"]["dir"], "**", "*.parquet")
                for f in sorted(glob.glob(pattern, recursive=True)):
                    try:
                        t = pq.read_table(f)
                    except OSError as e:
                        # A slice merged/ refuses (a Lance base file) in a group the window
                        # does not touch: the window's own files were all read.
                        if getattr(e, "errno", None) == 95 or "errno 95" in str(e):
                            skipped += 1
                            continue
                        raise
                    col = t.column("_hoodie_commit_time").cast(pa.string())
                    want.append(t.filter(pc.is_in(col, keep)))
                r["oracle"] = compare(ours, want)
                r["oracle"]["skipped"] = skipped
            except Exception as e:  # noqa: BLE001
                r["oracle_error"] = repr(e)[:300]
        if (v.get("same_as_dir") or v.get("same_as_file")) is not None and ours is not None:
            try:
                if v.get("same_as_file") is not None:
                    files = [pq.read_table(v["same_as_file"])]
                else:
                    files = read_dir(v["same_as_dir"])
                cols = v.get("stringify") or []
                r["same_as_dir"] = compare(stringified(ours, cols), stringified(files, cols))
                r["same_as_dir"]["all_null"] = all_null_columns(ours, files)
            except Exception as e:  # noqa: BLE001
                r["same_as_dir_error"] = repr(e)[:300]
        if v.get("model") is not None and ours is not None:
            model = v["model"]
            cols = sorted(model[0].keys()) if model else ["id"]
            mine = [t.select([c for c in cols if c in t.column_names]) for t in ours]
            r["model"] = compare(mine, [pa.Table.from_pylist(model)] if model else [])
        if v["as_of"] is None and v.get("window") is None and req.get("gold") and ours is not None:
            gold = read_dir(req["gold"])
            if gold:
                r["spark"] = compare(ours, gold)
        out["views"].append(r)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

"""The change data feed of `delta/` read with delta-rs (`deltalake`'s `load_cdf`) one version at a
time, compared with Hudi's change feed of the same write read with pyarrow from `cdc/`.

Input (JSON on stdin): {"delta": <delta/ root>, "cdc": <cdc/ root>, "versions": [<n>, ...]}.
For each version n its log file's commitInfo names the write (`hudi.instant`, `hudi.completion`
on table versions 8 and 9); the window of `cdc/` that ends at the time that selects it
(`hudi.completion`, else `hudi.instant`) holds its change records. Each side becomes a multiset
of (change type, record key, data columns): an `i` record is `insert` with its after image, a `u`
is `update_preimage` with its before image and `update_postimage` with its after image, a `d` is
`delete` with its before image. The data columns are those of the feed's images that the Delta
rows also have, compared as their JSON spelling (timestamps in UTC, decimals as text).

Output: one answer per version: {"version", "window", "cut" (a pending write cuts the window
short before the write, so `cdc/` does not hold it yet), "delta_error" or "hudi_error" where a
side cannot be read, "match", "kinds" (rows per change type), "only_delta", "only_hudi" (a few of
each)}.
"""

import collections
import datetime
import decimal
import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

META = {
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
    "_hoodie_operation",
}
DELTA_EXTRA = {"_change_type", "_commit_version", "_commit_timestamp"}


def norm(v):
    """A value as comparable text, whichever Arrow type each side read it as."""
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return v.isoformat()
    if isinstance(v, (datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v.normalize()) if v == v else "NaN"
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, float):
        return repr(float(v))
    if isinstance(v, dict):
        return {k: norm(x) for k, x in sorted(v.items())}
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    return v


def key_of(kind, key, image, columns):
    return json.dumps(
        [kind, key, {c: norm(image.get(c)) for c in columns}], sort_keys=True, default=str
    )


def raise_it(e):
    raise e


def feed_files(root):
    """The files under `root`: a directory that cannot be listed (a refused window) fails."""
    os.listdir(root)
    out = []
    for d, _, names in os.walk(root, onerror=raise_it):
        out.extend(os.path.join(d, n) for n in names if n.endswith(".parquet"))
    return sorted(out)


def hudi_records(window_dir):
    """The change records of a `cdc/` window: (op, key, before, after), and the image columns."""
    records, columns = [], set()
    for f in feed_files(window_dir):
        t = pq.read_table(f)
        for name in ("before", "after"):
            columns.update(x.name for x in t.schema.field(name).type)
        for r in t.to_pylist():
            records.append((r["op"], r["_hoodie_record_key"], r["before"], r["after"]))
    return records, columns


def hudi_rows(records, columns):
    rows = collections.Counter()
    for op, key, before, after in records:
        if op == "i":
            rows[key_of("insert", key, after, columns)] += 1
        elif op == "u":
            rows[key_of("update_preimage", key, before, columns)] += 1
            rows[key_of("update_postimage", key, after, columns)] += 1
        elif op == "d":
            rows[key_of("delete", key, before, columns)] += 1
        else:
            raise ValueError(f"op {op!r}")
    return rows


def delta_rows(table, columns):
    rows = collections.Counter()
    for r in table.to_pylist():
        rows[key_of(r["_change_type"], r["_hoodie_record_key"], r, columns)] += 1
    return rows


def commit_info(delta, n):
    with open(os.path.join(delta, "_delta_log", f"{n:020}.json")) as f:
        return json.loads(f.readline())["commitInfo"]


def window_of(cdc, info):
    end = info.get("hudi.completion") or info["hudi.instant"]
    for w in os.listdir(cdc):
        if w.split("..", 1)[1] == end:
            return w
    return None


def main():
    req = json.load(sys.stdin)
    delta, cdc = req["delta"], req["cdc"]
    out = []
    for n in req["versions"]:
        a = {"version": n}
        try:
            info = commit_info(delta, n)
        except OSError as e:
            a["log_error"] = repr(e)[:300]
            out.append(a)
            continue
        a["window"] = w = window_of(cdc, info)
        columns = None
        try:
            # A pending write inside the window cuts it short before the write (v6, BLOCK).
            end = os.getxattr(os.path.join(cdc, w), "user.hudi.effective_end").decode()
            a["cut"] = end != w.split("..", 1)[1]
            records, images = hudi_records(os.path.join(cdc, w))
            columns = images
        except Exception as e:  # a refused window or feed file
            a["hudi_error"] = repr(e)[:300]
        try:
            dt = DeltaTable(delta, version=n)
            cdf = dt.load_cdf(starting_version=n, ending_version=n)
            t = pa.RecordBatchReader.from_stream(cdf).read_all()
            delta_columns = set(t.column_names) - DELTA_EXTRA - META
            if columns is not None:
                columns = sorted(columns & delta_columns)
        except Exception as e:
            a["delta_error"] = repr(e)[:300]
        if "hudi_error" in a or "delta_error" in a:
            out.append(a)
            continue
        h, d = hudi_rows(records, columns), delta_rows(t, columns)
        a["match"] = h == d
        a["columns"] = len(columns)
        a["kinds"] = dict(collections.Counter(json.loads(k)[0] for k in d.elements()))
        a["only_delta"] = list((d - h).keys())[:3]
        a["only_hudi"] = list((h - d).keys())[:3]
        out.append(a)
    json.dump(out, sys.stdout)


main()

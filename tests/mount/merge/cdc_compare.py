"""Check the change feed of a mounted table (cdc/<w>/) against change records computed here,
independently of hudifs's change-feed code, from the mount's merged snapshots.

Input (JSON on stdin): {"mount": dir, "windows": [{"window": name, "writes": [[requested,
kind], ...]}]}, kind being "data" for writes that change records (compactions, clusterings and
log compactions are skipped, as Hudi's CDC query skips them).

For each data write W of a window: the rows of merged/as_of/<W - 1 ms>/ ("before") and of
merged/as_of/<W>/ ("after"), grouped by (file group, record key), the file group read from the
file name (a merged file and a base file both start with the file id). One change record per
record (a file group may hold a key twice): a row after whose _hoodie_commit_time is W is "u"
when a row of its key before is left to pair it with (after the rows W did not touch took
theirs, by commit time and sequence number), else "i"; a row before left over is "d". Images
are the data columns (meta columns left out; null columns dropped, so that a column added by a
later schema compares equal).

Output: {"windows": [{"window", "rows", "expected", "match", "ordered", "extra", "missing"}]}.
"""
import datetime
import glob
import json
import os
import re
import sys
from collections import Counter

import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(__file__))
from compare import canon  # noqa: E402

META = {
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
}
FILE_ID = re.compile(r"^\.?([0-9a-fA-F-]+-\d+)_")


def minus_one_ms(t):
    d = datetime.datetime.strptime(t[:14], "%Y%m%d%H%M%S") + datetime.timedelta(
        milliseconds=int(t[14:17] or 0)
    )
    d -= datetime.timedelta(milliseconds=1)
    return d.strftime("%Y%m%d%H%M%S") + "%03d" % (d.microsecond // 1000)


def image(row):
    # Values as text: an image is typed with the newest state's schema, where a column's type
    # can differ from an older snapshot's file (a long written as a string later).
    return json.dumps(
        {k: str(canon(v)) for k, v in row.items() if k not in META and v is not None},
        sort_keys=True,
    )


def state(d):
    """(file group, record key) -> its rows, in file order (a file group may hold a key twice)."""
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "**", "*.parquet"), recursive=True)):
        m = FILE_ID.match(os.path.basename(f))
        group = m.group(1) if m else os.path.basename(f)
        for row in pq.read_table(f).to_pylist():
            out.setdefault((group, row["_hoodie_record_key"]), []).append(row)
    return out


def ident(row):
    return (row.get("_hoodie_commit_time"), row.get("_hoodie_commit_seqno"))


def expected(mount, writes):
    """One change record per record: per key, a row the write did not touch is the row before
    with the same commit time and sequence number; each row the write wrote updates the next
    row before that no untouched row is (else it is an insert); the rows before left over are
    deletes."""
    out = []
    for w, kind in writes:
        if kind != "data":
            continue
        before = state(os.path.join(mount, "merged", "as_of", minus_one_ms(w)))
        after = state(os.path.join(mount, "merged", "as_of", w))
        for k in list(after) + [k for k in before if k not in after]:
            left = list(before.get(k, []))
            wrote = []
            for row in after.get(k, []):
                if row.get("_hoodie_commit_time") == w:
                    wrote.append(row)
                    continue
                same = next((i for i, b in enumerate(left) if ident(b) == ident(row)), None)
                if same is not None:
                    left.pop(same)
            for row in wrote:
                b = left.pop(0) if left else None
                op = "u" if b is not None else "i"
                out.append((op, w, k[1], row["_hoodie_partition_path"], b and image(b), image(row)))
            for b in left:
                out.append(("d", w, k[1], b["_hoodie_partition_path"], image(b), None))
    return out


def actual(d):
    out = []
    ordered = True
    for f in sorted(glob.glob(os.path.join(d, "**", "*.parquet"), recursive=True)):
        rows = pq.read_table(f).to_pylist()
        ts = [r["ts_ms"] for r in rows]
        ordered = ordered and ts == sorted(ts)
        for r in rows:
            out.append(
                (
                    r["op"],
                    r["ts_ms"],
                    r["_hoodie_record_key"],
                    r["_hoodie_partition_path"],
                    r["before"] and image(r["before"]),
                    r["after"] and image(r["after"]),
                )
            )
    return out, ordered


def main():
    req = json.load(sys.stdin)
    res = {"windows": []}
    for w in req["windows"]:
        r = {"window": w["window"]}
        try:
            ours, ordered = actual(os.path.join(req["mount"], "cdc", w["window"]))
            want = expected(req["mount"], w["writes"])
            a, b = Counter(ours), Counter(want)
            r.update(
                rows=len(ours),
                expected=len(want),
                match=a == b,
                ordered=ordered,
                ops=dict(Counter(x[0] for x in ours)),
                extra=[list(x) for x in (a - b).elements()][:3],
                missing=[list(x) for x in (b - a).elements()][:3],
            )
        except Exception as e:  # noqa: BLE001
            m = re.search(r"errno (\d+)", str(e), re.I)
            r["error"] = {
                "errno": getattr(e, "errno", None) or (int(m.group(1)) if m else None),
                "error": repr(e)[:300],
            }
        res["windows"].append(r)
    json.dump(res, sys.stdout)


main()

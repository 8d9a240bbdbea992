"""DuckDB's table-format scan of a mount against read_parquet of the same files.

Input (stdin, JSON): {"load": Python that loads the format's extensions into connection `c`,
"tables": [{"scan": "delta_scan('...')" or "iceberg_scan('...')", "files": a glob}]}.
Output: for each table, the row count and sorted record keys through the scan and through the
files (`scan`, `files`), the columns all-NULL through the scan but not in the files
(`all_null`) and their DuckDB types (`all_null_types`), or `error`.
"""
import json
import sys

req = json.load(sys.stdin)
exec(req["load"])  # noqa: S102 - the test's own extension loader; defines `c`
out = []
for t in req["tables"]:
    r = {}
    try:
        src = t["scan"]
        files = "read_parquet('" + t["files"] + "', union_by_name=true)"
        desc = c.execute("select * from " + src + " limit 0").description  # noqa: F821
        cols = [d[0] for d in desc]
        types = dict((d[0], str(d[1])) for d in desc)
        key = "_hoodie_record_key" if "_hoodie_record_key" in cols else None
        q = "select count(*){} from {}".format(
            ", list(" + key + " order by " + key + ")" if key else "", "{}")
        r["scan"] = c.execute(q.format(src)).fetchall()[0]  # noqa: F821
        r["files"] = c.execute(q.format(files)).fetchall()[0]  # noqa: F821

        def nulls(s):
            return set(x for x in cols if c.execute(  # noqa: F821
                'select count("' + x + '") from ' + s).fetchall()[0][0] == 0)
        r["all_null"] = sorted(nulls(src) - nulls(files))
        r["all_null_types"] = [types[x] for x in r["all_null"]]
    except Exception as e:  # noqa: BLE001
        r["error"] = repr(e)[:300]
    out.append(r)
json.dump(out, sys.stdout, default=str)

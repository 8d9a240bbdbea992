#!/usr/bin/env python3
"""hudi-rs side of scripts/bench figures 3 and 8: time HudiTableBuilder...build() +
get_file_slices() in this process (Python start-up and the import are not timed) and print one
JSON object. Usage: bench-hudi-rs.py TABLE [STORAGE_OPTIONS_JSON] (figure 8: an s3:// table and
its storage options, e.g. {"aws_endpoint_url": "http://127.0.0.1:PORT", "aws_allow_http": "true",
...})"""
import json
import sys
import time

from hudi import HudiTableBuilder

t0 = time.perf_counter()
builder = HudiTableBuilder.from_base_uri(sys.argv[1])
if len(sys.argv) > 2:
    builder = builder.with_storage_options(json.loads(sys.argv[2]))
table = builder.build()
t1 = time.perf_counter()
slices = table.get_file_slices()
t2 = time.perf_counter()
print(json.dumps({"seconds": t2 - t0, "build_seconds": t1 - t0, "slices": len(slices)}))

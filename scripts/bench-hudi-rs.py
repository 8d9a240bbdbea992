#!/usr/bin/env python3
"""hudi-rs side of scripts/bench figure 3: time HudiTableBuilder...build() + get_file_slices()
in this process (Python start-up and the import are not timed) and print one JSON object.
Usage: bench-hudi-rs.py TABLE"""
import json
import sys
import time

from hudi import HudiTableBuilder

t0 = time.perf_counter()
table = HudiTableBuilder.from_base_uri(sys.argv[1]).build()
t1 = time.perf_counter()
slices = table.get_file_slices()
t2 = time.perf_counter()
print(json.dumps({"seconds": t2 - t0, "build_seconds": t1 - t0, "slices": len(slices)}))

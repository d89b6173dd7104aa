"""Schemathesis hooks for scripts/schemathesis.sh.

Generated reports are mostly refused for reasons no schema can state: an agent token reports
for the first host it reported for only, and an interval must end near the server's clock. To
get most generated reports past those checks and into the store, three of every four keep
their generated values but for the host name, the interval's ends and the sequence number
(generated ones repeat, and a repeat is a duplicate), which are made to fit.
"""

import itertools
import time

import schemathesis

next_seq = itertools.count(1_000_000)


@schemathesis.hook
def before_call(context, case, kwargs):
    body = case.body
    if not (isinstance(body, dict) and isinstance(body.get("seq"), int)) or body["seq"] % 4 == 0:
        return
    body["seq"] = next(next_seq)
    if isinstance(body.get("host"), dict):
        body["host"]["name"] = "schemathesis-host"
    interval = body.get("interval")
    if isinstance(interval, dict) and isinstance(interval.get("length_ns"), int):
        end_ms = int(time.time() * 1000) - 1000
        interval["end_ms"] = end_ms
        interval["start_ms"] = end_ms - interval["length_ns"] // 1_000_000


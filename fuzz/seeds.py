#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/fuzz_targets/parsers.rs names the targets).

    fuzz/seeds.py CONFORMANCE OUT

CONFORMANCE is ../shared/conformance (peers' suites as data); OUT gets one folder per target.
Seeds come from the suites (PromQL test scripts, the exposition parsers' cases, the SigV4 suite,
the mustache spec, OpenSearch's YAML REST tests), from this repository (tests/sql/*.slt), and
a few made here: remote-write bodies and log segments written byte by byte, so that nothing but
Python's standard library is needed, and an Arrow IPC stream kept in fuzz/seeds/ (two rows,
written once with pyarrow). PyYAML is used when it is there.
"""

import hashlib
import json
import pathlib
import re
import struct
import sys

conformance = pathlib.Path(sys.argv[1])
out = pathlib.Path(sys.argv[2])
repo = pathlib.Path(__file__).resolve().parent.parent
counts = {}


def seed(target, data):
    if isinstance(data, str):
        data = data.encode()
    folder = out / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)
    counts[target] = counts.get(target, 0) + 1


try:
    import yaml
except ImportError:
    yaml = None

# PromQL: each eval's expression and each load line's series selector, one of each shape (the
# suites repeat expressions that differ only in numbers, strings or names: 6,231 seeds become
# about 1,400, which a short CI run gets through).
def promql_shape(text, names):
    text = re.sub(r'"[^"]*"', '""', text)
    text = re.sub(r"\b\d+(\.\d+)?(ms|s|m|h|d|w|y)?\b", "1", text)
    return re.sub(r"[A-Za-z_:][A-Za-z0-9_:]*", "x", text) if names else text


promql_shapes = set()
for test in sorted((conformance / "promql").glob("*.test")):
    for line in test.read_text().splitlines():
        line = line.strip()
        m = re.match(r"eval(?:_\w+)?\s+instant\s+at\s+\S+\s+(.*)", line) or re.match(
            r"eval(?:_\w+)?\s+range\s+from\s+\S+\s+to\s+\S+\s+step\s+\S+\s+(.*)", line)
        if m:
            text, shape = m.group(1), promql_shape(m.group(1), names=False)
        elif line and not line.startswith(("#", "load", "eval", "clear", "expect")) and "{" in line:
            text = line.split()[0]
            shape = promql_shape(text, names=True)
        else:
            continue
        if shape not in promql_shapes:
            promql_shapes.add(shape)
            seed("promql", text)

# The Prometheus text format and OpenMetrics: every case of the parsers' suites.
for path in sorted((conformance / "expfmt").rglob("*")):
    if path.is_file() and (path.name == "metrics" or path.suffix == ".txt"):
        seed("exposition", path.read_bytes())

# SigV4: each signed request of the suite as the target's lines (method, path, query,
# headers); header values folded over several lines are joined.
for request in sorted((conformance / "sigv4").rglob("*-signed-request.txt")):
    lines = request.read_text(errors="replace").split("\n")
    method, _, target = lines[0].partition(" ")
    target = target.rsplit(" HTTP/", 1)[0]
    path, _, query = target.partition("?")
    headers = [line for line in lines[1:] if ":" in line and not line.startswith(" ")]
    seed("sigv4", "\n".join([method, path, query] + headers))

# Mustache: each spec test's template, its first partial, its data.
for spec in sorted((conformance / "mustache").glob("*.json")):
    for test in json.loads(spec.read_text())["tests"]:
        partial = next(iter(test.get("partials", {}).values()), "")
        seed("template", f"{test['template']}\0{partial}\0{json.dumps(test['data'])}")

# OpenSearch's YAML tests: bulk bodies as NDJSON, search and aggregation bodies as JSON.
if yaml is not None:
    suites = conformance / "opensearch-yaml" / "test"
    for path in sorted(suites.rglob("*.yml")):
        try:
            documents = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue

        def walk(node):
            if isinstance(node, dict):
                for key, value in node.items():
                    if key == "bulk" and isinstance(value, dict) and isinstance(value.get("body"), list):
                        lines = [l if isinstance(l, str) else json.dumps(l, default=str) for l in value["body"]]
                        seed("bulk", "\n".join(lines) + "\n")
                    elif key in ("search", "count", "delete_by_query") and isinstance(value, dict) \
                            and isinstance(value.get("body"), dict):
                        seed("search", json.dumps(value["body"], default=str))
                    walk(value)
            elif isinstance(node, list):
                for item in node:
                    walk(item)

        walk(documents)

# SQL: every statement and query of the repository's sqllogictest files.
for slt in sorted((repo / "tests" / "sql").glob("*.slt")):
    block = []
    for line in slt.read_text().splitlines() + [""]:
        if line.startswith(("statement", "query")):
            block = []
        elif line.strip() in ("", "----"):
            if block:
                seed("sql", "\n".join(block))
            block = []
        elif not line.startswith("#"):
            block.append(line)

# Documents: a role, a user, a monitor and a channel, each behind its kind's byte.
seed("documents", b"\0" + b"""Version: 2025-01-01
Permissions:
  - ResourceType: record
    Actions: [read]
    Resources: ["logs-*"]
    Fields:
      Deny: ["secret"]
      Mask:
        - Field: host
          Type: redact
    Filter: {term: {team: a}}
  - ResourceType: metadata
    Actions: [read]
    Resources: ["*"]
Notifications:
  Monitor: {read: ["*"], execute: ["team-*"]}
""")
seed("documents", b"\1Version: 2025-01-01\nPassword: correct-horse-battery\nRoles: [reader, writer]\n")
seed("documents", b"\2" + json.dumps({
    "name": "errors", "enabled": True,
    "schedule": {"cron": {"expression": "0 */5 * * * *", "timezone": "Europe/Paris"}},
    "query": {"type": "querydsl", "datasets": ["logs"], "body": {"size": 0, "query": {"term": {"level": "error"}}}},
    "triggers": [{"name": "many", "severity": 1, "condition": {"type": "script", "script": {"source": "ctx.results[0].hits.total.value > 10"}},
                  "actions": [{"name": "page", "destination_id": "ops",
                               "subject_template": {"source": "{{monitor.name}}: {{ctx.results.0.hits.total.value}}"},
                               "message_template": {"source": "{{> footer}}"}, "throttle": {"value": 10, "unit": "MINUTES"}}]}],
}).encode())
seed("documents", b"\2" + json.dumps({
    "name": "rows", "schedule": {"period": {"interval": 1, "unit": "HOURS"}},
    "query": {"type": "sql", "statement": "SELECT COUNT(*) FROM logs"},
    "triggers": [{"name": "any", "severity": 2, "condition": {"type": "field_greater_than", "path": "/rows/0/0", "value": 0}, "actions": []}],
}).encode())
seed("documents", b"\3" + json.dumps({"name": "hook", "channel_type": "webhook", "webhook": {"url": "https://example.com/hook", "headers": {"x": "y"}}}).encode())
seed("documents", b"\3" + json.dumps({"name": "mail", "channel_type": "email", "email": {"smtp_account_id": "mail", "recipients": ["a@example.com"]}}).encode())

# Schedules: cron expressions with and without a zone, and periods.
for text in ["0 */5 * * * *", "0 0 9 * * MON-FRI\nEurope/Paris", "@daily", "0 30 2 * * *\nAmerica/New_York",
             "0 0 0 29 2 *", "*/10 * * * * 0,7", "15"]:
    seed("schedule", text)

# Data-plane rows: JSON objects, and an Arrow IPC stream of one batch (name utf8, n int64).
seed("rows", b"\1" + json.dumps([{"name": "a", "n": 1, "score": 0.5, "ok": True, "at": "2026-11-01T00:00:00Z",
                                  "tags": ["x"], "embedding": [0.1, 0.2, 0.3]}]).encode())


# An Arrow IPC stream: a schema (name utf8, n int64), one batch of two rows, its end.
seed("rows", b"\0" + (repo / "fuzz" / "seeds" / "rows.arrows").read_bytes())


# Remote write: a WriteRequest of one series, protobuf by hand, in snappy's block format with
# literals only (valid snappy, uncompressed).
def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, wire, payload):
    key = varint(number << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def label(name, value):
    return field(1, 2, name.encode()) + field(2, 2, value.encode())


def sample(value, ms):
    return field(1, 1, struct.pack("<d", value)) + field(2, 0, varint(ms))


series = field(1, 2, label("__name__", "http_requests_total")) + field(1, 2, label("job", "api")) \
    + field(2, 2, sample(1.0, 1780000000000)) + field(2, 2, sample(2.0, 1780000015000))
request = field(1, 2, series)


def snappy(data):
    out = bytearray(varint(len(data)))
    for at in range(0, len(data), 60):
        chunk = data[at:at + 60]
        out.append((len(chunk) - 1) << 2)
        out += chunk
    return bytes(out)


seed("remote_write", snappy(request))


# Log segments: a header and a frame of two records (events as protobuf bytes), CRC32C by hand.
def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


header = b"STRATLOG" + struct.pack("<HHQq", 1, 32, 7, 1780000000000)
header += struct.pack("<I", crc32c(header))
records = [field(1, 0, varint(1)) + field(2, 2, b"acme/default/logs"), b""]
body = struct.pack("<QI", 7, len(records)) + b"".join(struct.pack("<I", len(r)) + r for r in records)
frame = struct.pack("<II", len(body), crc32c(body)) + body
seed("log_frames", header + frame)
seed("log_frames", body)

# Search and bulk seeds of our own, beside the suites'.
seed("search", json.dumps({"query": {"bool": {"must": [{"match": {"message": "disk full"}}],
                                              "filter": [{"range": {"@timestamp": {"gte": "now-1h"}}}]}},
                           "aggs": {"per_hour": {"date_histogram": {"field": "@timestamp", "fixed_interval": "1h"},
                                                 "aggs": {"hosts": {"terms": {"field": "host"}}}}}}))
seed("search", json.dumps({"query": {"query_string": {"query": "host:a AND (message:disk OR bytes:[10 TO 20])"}}}))
seed("bulk", '{"index": {"_index": "logs", "_id": "1"}}\n{"host": "a", "bytes": 10, "@timestamp": "2026-11-01T00:00:00Z"}\n'
             '{"update": {"_id": "1"}}\n{"doc": {"bytes": 11}, "doc_as_upsert": true}\n{"delete": {"_id": "2"}}\n')

for target, count in sorted(counts.items()):
    print(f"{target}: {count} seeds")

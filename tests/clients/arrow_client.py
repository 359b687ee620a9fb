"""The data plane as a pyarrow user sees it: rows appended as an Arrow IPC stream, and every
answer read back as Arrow IPC. Run by tests/clients.rs against a live server; STRATA_URL and
STRATA_KEY say where and how."""

import os
import sys

import pyarrow as pa
import pyarrow.ipc as ipc
import requests

URL = os.environ["STRATA_URL"]
KEY = os.environ["STRATA_KEY"]
AUTH = {"Authorization": f"Bearer {KEY}"}
ARROW = "application/vnd.apache.arrow.stream"


def post(path, **kwargs):
    headers = {**AUTH, **kwargs.pop("headers", {})}
    response = requests.post(URL + path, headers=headers, timeout=30, **kwargs)
    if response.status_code >= 300:
        sys.exit(f"POST {path}: {response.status_code} {response.text}")
    return response


def arrow_body(table):
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=len(table) or 1):
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def read_arrow(response):
    assert response.headers["content-type"] == ARROW, response.headers
    return ipc.open_stream(response.content).read_all()


post("/v1/databases", json={"name": "py"})
post(
    "/v1/create_table/py",
    json={
        "name": "readings",
        "schema": [
            {"name": "sensor", "type": "utf8", "nullable": False},
            {"name": "value", "type": "float64"},
            {"name": "at", "type": "timestamp[ms,UTC]"},
            {"name": "embedding", "type": "vector<float32,3>"},
        ],
        "vector_column": "embedding",
    },
)

# An Arrow table built the way pyarrow users build them: int32 narrower than the column,
# a fixed-size list for the vector, timestamps with a time zone.
table = pa.table(
    {
        "sensor": pa.array(["a", "b", "c", "d"], pa.string()),
        "value": pa.array([1.5, None, 3.25, 4.0], pa.float64()),
        "at": pa.array([1_700_000_000_000 + i for i in range(4)], pa.timestamp("ms", tz="UTC")),
        "embedding": pa.array(
            [[1, 0, 0], [0, 1, 0], None, [0, 0, 1]], pa.list_(pa.float32(), 3)
        ),
    }
)
appended = read_arrow(
    post("/v1/append/py?table=readings", data=arrow_body(table), headers={"Content-Type": ARROW})
)
assert appended.column_names[0] == "_row_id", appended.schema
assert appended.column("_row_id").to_pylist() == [0, 1, 2, 3]
assert appended.column("sensor").to_pylist() == ["a", "b", "c", "d"]
assert appended.schema.field("embedding").type == pa.list_(pa.float32(), 3)

# Update with an Arrow body: the replacement keeps its row id.
replacement = pa.table({"sensor": ["B"], "value": pa.array([20.0], pa.float64())})
count = post(
    "/v1/update/py?table=readings&predicate=sensor%20%3D%20'b'",
    data=arrow_body(replacement),
    headers={"Content-Type": ARROW},
).json()
assert count == {"matched": 1, "n_tombstoned": 1, "n_not_found": 0}, count

result = read_arrow(
    post(
        "/v1/query_sql/py",
        json={"sql": "SELECT _row_id, sensor, value, at, embedding FROM readings ORDER BY _row_id"},
    )
)
assert result.column("_row_id").to_pylist() == [0, 1, 2, 3]
assert result.column("sensor").to_pylist() == ["a", "B", "c", "d"]
assert result.column("value").to_pylist() == [1.5, 20.0, 3.25, 4.0]
assert result.schema.field("at").type == pa.timestamp("ms", tz="UTC")
# Strings are scanned as views inside; answers keep the declared utf8 type.
assert result.schema.field("sensor").type == pa.string(), result.schema
assert result.column("embedding").to_pylist()[0] == [1.0, 0.0, 0.0]
assert result.column("embedding").to_pylist()[2] is None

aggregate = read_arrow(
    post("/v1/query_sql/py", json={"sql": "SELECT count(*) AS n, sum(value) AS total FROM readings"})
)
assert aggregate.to_pylist() == [{"n": 4, "total": 28.75}], aggregate.to_pylist()

# Two batches in one body is refused, naming the rule.
two = pa.table({"sensor": ["x", "y"]})
sink = pa.BufferOutputStream()
with ipc.new_stream(sink, two.schema) as writer:
    for batch in two.to_batches(max_chunksize=1):
        writer.write_batch(batch)
refused = requests.post(
    URL + "/v1/append/py?table=readings",
    data=sink.getvalue().to_pybytes(),
    headers={**AUTH, "Content-Type": ARROW},
    timeout=30,
)
assert refused.status_code == 400, refused.text
assert "exactly one record batch" in refused.json()["message"], refused.text

print("pyarrow client: ok")

"""The platform API as an OpenSearch user reaches it: opensearch-py, signing with its own
AWSV4SignerAuth, its bulk helper, search, search_after paging, count and msearch, partial
updates, aliases and put mapping. Run by
tests/clients.rs against a live server; STRATA_PLATFORM_URL, STRATA_ACCESS_KEY and
STRATA_SECRET_KEY say where and who; over HTTPS (an https URL), STRATA_CA_FILE is the
certificate to trust."""

import os
import sys
from urllib.parse import urlparse

from botocore.credentials import Credentials
from opensearchpy import AWSV4SignerAuth, OpenSearch, RequestsHttpConnection, helpers
from opensearchpy.exceptions import NotFoundError, RequestError

URL = urlparse(os.environ["STRATA_PLATFORM_URL"])
CREDENTIALS = Credentials(os.environ["STRATA_ACCESS_KEY"], os.environ["STRATA_SECRET_KEY"])

HTTPS = URL.scheme == "https"
client = OpenSearch(
    hosts=[{"host": URL.hostname, "port": URL.port}],
    http_auth=AWSV4SignerAuth(CREDENTIALS, "us-east-1", "strata"),
    use_ssl=HTTPS,
    verify_certs=HTTPS,
    ca_certs=os.environ.get("STRATA_CA_FILE") if HTTPS else None,
    connection_class=RequestsHttpConnection,
    timeout=30,
)


def check(condition, what):
    if not condition:
        sys.exit(f"opensearch client: {what}")


info = client.info()
check(info["tagline"] == "You Know, for Search", f"info: {info}")

# The bulk helper, in chunks, creating the index on the way.
METHODS = ["GET", "POST", "PUT", "DELETE"]
actions = (
    {
        "_index": "weblogs",
        "_id": f"doc-{n}",
        "_source": {
            "n": n,
            "method": METHODS[n % 4],
            "status": 200 if n % 10 else 500,
            "message": "disk full" if n % 10 == 0 else "served from cache",
            "@timestamp": 1_795_428_000_000 + n * 1000,
        },
    }
    for n in range(500)
)
indexed, errors = helpers.bulk(client, actions, chunk_size=120)
check(indexed == 500 and not errors, f"bulk: {indexed} indexed, errors {errors}")

count = client.count(index="weblogs")["count"]
check(count == 500, f"count: {count}")
count = client.count(index="weblogs", body={"query": {"term": {"status": 500}}})["count"]
check(count == 50, f"count with a query: {count}")

found = client.search(
    index="weblogs",
    body={"query": {"match": {"message": "disk"}}, "size": 5},
)
check(found["hits"]["total"]["value"] == 50, f"search total: {found['hits']['total']}")
check(len(found["hits"]["hits"]) == 5, "search size")
check(all(h["_source"]["status"] == 500 for h in found["hits"]["hits"]), "search hits")

# search_after through everything, by n.
seen = []
after = None
while True:
    body = {"sort": [{"n": "asc"}], "size": 90, "query": {"match_all": {}}}
    if after is not None:
        body["search_after"] = after
    page = client.search(index="weblogs", body=body)["hits"]["hits"]
    if not page:
        break
    seen.extend(h["_source"]["n"] for h in page)
    after = page[-1]["sort"]
check(seen == list(range(500)), f"search_after paging saw {len(seen)} records")

aggs = client.search(
    index="weblogs",
    body={"size": 0, "aggs": {"methods": {"terms": {"field": "method"}}}},
)["aggregations"]["methods"]["buckets"]
check(sorted((b["key"], b["doc_count"]) for b in aggs) == [(m, 125) for m in sorted(METHODS)], f"terms: {aggs}")

answers = client.msearch(
    body=[
        {"index": "weblogs"},
        {"query": {"term": {"method": "GET"}}, "size": 0},
        {"index": "nowhere"},
        {"query": {"match_all": {}}},
        {"index": "weblogs"},
        {"query": {"range": {"n": {"gte": 490}}}, "size": 0},
    ]
)["responses"]
check(answers[0]["hits"]["total"]["value"] == 125, f"msearch 0: {answers[0]}")
check(answers[1]["status"] == 404 and "error" in answers[1], f"msearch 1: {answers[1]}")
check(answers[2]["hits"]["total"]["value"] == 10, f"msearch 2: {answers[2]}")

try:
    client.search(index="weblogs", body={"query": {"no_such_query": {}}})
    check(False, "an unknown query was accepted")
except RequestError as error:
    check(error.status_code == 400, f"unknown query: {error}")
try:
    client.search(index="nowhere", body={"query": {"match_all": {}}})
    check(False, "a search of a missing index was accepted")
except NotFoundError:
    pass

mapping = client.indices.get_mapping(index="weblogs")
check(mapping["weblogs"]["mappings"]["properties"]["n"]["type"] == "long", f"mapping: {mapping}")

# Partial updates: the document API and the bulk helper's update actions.
client.update(index="weblogs", id="doc-1", body={"doc": {"status": 503, "tags": ["retry", "slow"]}})
doc = client.get(index="weblogs", id="doc-1")["_source"]
check(doc["status"] == 503 and doc["n"] == 1 and doc["tags"] == ["retry", "slow"], f"update: {doc}")
updated, errors = helpers.bulk(
    client,
    ({"_op_type": "update", "_index": "weblogs", "_id": f"doc-{n}", "doc": {"checked": True}} for n in range(10)),
)
check(updated == 10 and not errors, f"bulk updates: {updated} {errors}")
count = client.count(index="weblogs", body={"query": {"term": {"checked": True}}})["count"]
check(count == 10, f"updated records: {count}")
count = client.count(index="weblogs", body={"query": {"term": {"tags": "retry"}}})["count"]
check(count == 1, f"a value among several: {count}")

# An alias, filtered, read and written through.
client.indices.put_alias(index="weblogs", name="errors", body={"filter": {"term": {"status": 500}}})
check(client.count(index="errors")["count"] == 50, f"alias: {client.count(index='errors')}")
check("errors" in client.indices.get_alias(index="weblogs")["weblogs"]["aliases"], "get_alias")
client.index(index="errors", id="through-alias", body={"status": 500, "n": 1000})
check(client.count(index="weblogs", body={"query": {"ids": {"values": ["through-alias"]}}})["count"] == 1, "write through an alias")
client.indices.delete_alias(index="weblogs", name="errors")
check(not client.indices.exists_alias(name="errors"), "alias deleted")

# A field declared on an index that exists.
client.indices.put_mapping(index="weblogs", body={"properties": {"client": {"type": "ip"}}})
client.index(index="weblogs", id="with-ip", body={"client": "10.9.8.7", "n": 1001})
found = client.search(index="weblogs", body={"query": {"term": {"client": "10.0.0.0/8"}}})
check(found["hits"]["total"]["value"] == 1, f"ip field: {found['hits']}")
print("opensearch client: ok")

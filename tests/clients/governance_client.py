"""Governance as an AWS SDK user drives it: YAML documents signed by botocore's SigV4Auth. Run by
tests/clients.rs against a live server; STRATA_PLATFORM_URL, STRATA_ACCESS_KEY and
STRATA_SECRET_KEY (the root user's) say where and who."""

import json
import os
import sys

import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

URL = os.environ["STRATA_PLATFORM_URL"]
ROOT = Credentials(os.environ["STRATA_ACCESS_KEY"], os.environ["STRATA_SECRET_KEY"])
YAML = {"Content-Type": "application/yaml", "Accept": "application/json"}
JSON = {"Content-Type": "application/json"}


def signed(credentials, method, path, body=None, headers=None):
    request = AWSRequest(method=method, url=URL + path, data=body, headers=headers or {})
    SigV4Auth(credentials, "strata", "us-east-1").add_auth(request)
    prepared = request.prepare()
    return requests.request(
        method, prepared.url, headers=dict(prepared.headers), data=body, timeout=30
    )


def expect(response, status, what):
    if response.status_code != status:
        sys.exit(f"{what}: expected {status}, got {response.status_code} {response.text}")
    return response


# The root user loads two teams' records, a role that reads team a's without the secret, and a
# user that holds it.
bulk = "".join(
    json.dumps(line) + "\n"
    for line in [
        {"index": {"_index": "logs-app", "_id": "1"}},
        {"team": "a", "msg": "disk full", "secret_token": "s-a"},
        {"index": {"_index": "logs-app", "_id": "2"}},
        {"team": "b", "msg": "disk ok", "secret_token": "s-b"},
    ]
)
written = expect(
    signed(ROOT, "POST", "/_bulk", bulk, {"Content-Type": "application/x-ndjson"}), 200, "bulk"
).json()
assert not written["errors"], written
role = """Version: 2025-01-01
Permissions:
  - ResourceType: record
    Actions: [read]
    Resources: [logs-*]
    Fields:
      Deny: [secret_*]
    Filter:
      term: {team: a}
"""
expect(signed(ROOT, "PUT", "/role/team-a", role, YAML), 200, "PUT role")
refused = signed(ROOT, "PUT", "/role/bad", "Version: 2025-01-01\nPermissions:\n  - {ResourceType: table, Actions: [read], Resources: ['*']}\n", YAML)
expect(refused, 400, "a bad role")
assert "Permissions[0].ResourceType" in refused.json()["message"], refused.text
created = expect(
    signed(ROOT, "PUT", "/user/ann", "Version: 2025-01-01\nPassword: correct-horse-battery\nRoles: [team-a]\n", YAML),
    200,
    "PUT user",
).json()
ann = Credentials(created["access_key"], created["secret_key"])

# Ann sees team a's record without its secret, and may not govern.
me = expect(signed(ann, "GET", "/user/ann", headers={"Accept": "application/json"}), 200, "GET self").json()
assert me == {"ann": {"Version": "2025-01-01", "Roles": ["team-a"], "account_id": "acme"}}, me
query = json.dumps({"query": {"match_all": {}}})
hits = expect(signed(ann, "POST", "/logs-app/_search", query, JSON), 200, "search").json()["hits"]
assert hits["total"]["value"] == 1, hits
source = hits["hits"][0]["_source"]
source.pop("@timestamp")  # stamped at ingestion
assert source == {"team": "a", "msg": "disk full"}, hits
expect(signed(ann, "GET", "/users"), 403, "a user lists users")
expect(signed(ann, "PUT", "/role/team-a", "Version: 2025-01-01\n", YAML), 403, "a user changes a role")

# Only ann rotates ann's keys; the old pair is refused from then on.
expect(signed(ROOT, "PATCH", "/user/ann/keys"), 403, "root rotates another's keys")
rotated = expect(signed(ann, "PATCH", "/user/ann/keys", headers={"Accept": "application/json"}), 200, "rotate").json()
assert rotated["status"] == "OK", rotated
expect(signed(ann, "GET", "/user/ann"), 401, "the old pair")
fresh = Credentials(rotated["access_key"], rotated["secret_key"])
expect(signed(fresh, "GET", "/user/ann"), 200, "the new pair")
expect(signed(ROOT, "DELETE", "/user/ann"), 200, "delete user")
expect(signed(fresh, "GET", "/user/ann"), 401, "a deleted user's pair")
print("governance client: ok")

"""The platform API as an AWS SDK user reaches it: requests signed by botocore's SigV4Auth, the
signer of the AWS SDK for Python, not by strata's own code. Run by tests/clients.rs against a
live server; STRATA_PLATFORM_URL, STRATA_ACCESS_KEY and STRATA_SECRET_KEY say where and who;
over HTTPS, STRATA_CA_FILE is the certificate to trust."""

import json
import os
import sys

import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

URL = os.environ["STRATA_PLATFORM_URL"]
VERIFY = os.environ.get("STRATA_CA_FILE", True)
CREDENTIALS = Credentials(os.environ["STRATA_ACCESS_KEY"], os.environ["STRATA_SECRET_KEY"])


def signed(method, path, body=None, credentials=CREDENTIALS, send_body=None, headers=None):
    """Signs with botocore, then sends (send_body, if given, instead of the signed body)."""
    request = AWSRequest(method=method, url=URL + path, data=body, headers=headers or {})
    SigV4Auth(credentials, "strata", "us-east-1").add_auth(request)
    prepared = request.prepare()
    data = body if send_body is None else send_body
    return requests.request(
        method, prepared.url, headers=dict(prepared.headers), data=data, timeout=30, verify=VERIFY
    )


def expect(response, status, what):
    if response.status_code != status:
        sys.exit(f"{what}: expected {status}, got {response.status_code} {response.text}")
    return response


info = expect(signed("GET", "/"), 200, "GET /").json()
assert info["tagline"] == "You Know, for Search", info
expect(signed("GET", "/?api-version=2025-06-30"), 200, "GET / with a query")
response = signed("GET", "/")
assert response.headers["X-Elastic-Product"] == "Elasticsearch", response.headers

# A path with characters botocore encodes twice: signed right, so authenticated, then 404.
expect(signed("GET", "/my%20data/no%2Fthing"), 404, "an encoded path")

# What must be refused: a body changed after signing, a wrong secret, no signature.
body = json.dumps({"query": {"match_all": {}}})
ct = {"Content-Type": "application/json"}
expect(signed("POST", "/", body, headers=ct), 405, "a signed body")
tampered = json.dumps({"query": {"match_none": {}}})
expect(signed("POST", "/", body, send_body=tampered, headers=ct), 401, "a tampered body")
expect(
    signed("GET", "/", credentials=Credentials(CREDENTIALS.access_key, "x" * 40)),
    401,
    "a wrong secret",
)
expect(requests.get(URL + "/", timeout=30, verify=VERIFY), 401, "an unsigned request")
print("sigv4 client: ok")

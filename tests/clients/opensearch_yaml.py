"""Runs OpenSearch's YAML REST tests (../shared/conformance/opensearch-yaml) against a live
strata platform API, signing every request with botocore's SigV4Auth, and prints passed/total
with every failure and its reason. Run by tests/opensearch_yaml.rs; STRATA_PLATFORM_URL,
STRATA_ACCESS_KEY, STRATA_SECRET_KEY say where and who, STRATA_YAML_DIR where the suite is,
STRATA_YAML_RESULTS where to write the results as JSON, STRATA_YAML_ONLY which tests to run
(those whose "file: name" contains it; all by default).

The grammar is the suite's (its README): setup/teardown, do (with catch), match, length,
is_true, is_false, gt/gte/lt/lte, set, skip. APIs with a spec in api/ are called by it (the
first path whose parts are all given); the others the tests use are mapped here:
`index` (PUT /{index}/_doc/{id}, or POST /{index}/_doc), `indices.create` (PUT /{index}),
`indices.delete` (DELETE /{index}), `cluster.health` (GET /_cluster/health), `indices.refresh`
(strata makes writes visible at once: not sent), and those in `PATHS` at the paths of
OpenSearch's REST specification. Anything else fails its test with "unsupported API"."""

import json
import os
import re
import sys
from pathlib import Path
from urllib.parse import quote, urlencode

import requests
import yaml
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

URL = os.environ["STRATA_PLATFORM_URL"]
CREDENTIALS = Credentials(os.environ["STRATA_ACCESS_KEY"], os.environ["STRATA_SECRET_KEY"])
SUITE = Path(os.environ["STRATA_YAML_DIR"])
# The version strata's cluster-info document claims (GET /): skip ranges are compared with it.
VERSION = (8, 11, 0)
FEATURES = {"headers", "allowed_warnings", "warnings"}
# STRATA_YAML_ONLY: run only the tests whose "file: name" contains it (to look at a few).
ONLY = os.environ.get("STRATA_YAML_ONLY")

class Loader(yaml.SafeLoader):
    """YAML as the suite's Java runner reads it: an unquoted date stays a string."""


Loader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

SPECS = {}
for spec_file in (SUITE / "api").glob("*.json"):
    SPECS.update(json.loads(spec_file.read_text()))


class Failure(Exception):
    pass


class ParamError(Exception):
    """A client-side error: the request breaks its API's spec (a required body missing, a
    parameter the API does not have), so it is never sent; `catch: param` expects it."""


class Skip(Exception):
    pass


def call(method, path, params=None, body=None, headers=None):
    """A signed request; the status and the body (JSON when it is JSON)."""
    url = URL + path
    if params:
        url += "?" + urlencode(params)
    headers = dict(headers or {})
    data = None
    if body is not None:
        if isinstance(body, (bytes, str)):
            data = body.encode() if isinstance(body, str) else body
            headers.setdefault("Content-Type", "application/x-ndjson")
        else:
            data = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
    request = AWSRequest(method=method, url=url, data=data, headers=headers)
    SigV4Auth(CREDENTIALS, "strata", "us-east-1").add_auth(request)
    prepared = request.prepare()
    response = requests.request(
        method, prepared.url, headers=dict(prepared.headers), data=data, timeout=60
    )
    if os.environ.get("STRATA_YAML_TRACE"):
        print(f"> {method} {url} {data[:2000] if data else ''}\n< {response.status_code} {response.text[:2000]}")
    try:
        answer = response.json()
    except ValueError:
        answer = response.text
    return response.status_code, answer


def ndjson(body):
    if isinstance(body, str):
        return body if body.endswith("\n") else body + "\n"
    lines = [line if isinstance(line, str) else json.dumps(line) for line in body]
    return "\n".join(lines) + "\n"


def to_param(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def by_spec(api, args, headers):
    spec = SPECS[api]
    args = dict(args)
    body = args.pop("body", None)
    if body is None and spec.get("body", {}).get("required"):
        raise ParamError(f"{api}: a body is required")
    known = set(spec.get("params", {})) | {p for c in spec["url"]["paths"] for p in c.get("parts", {})} \
        | COMMON_PARAMS
    unknown = sorted(set(args) - known)
    if unknown:
        raise ParamError(f"{api}: unknown parameters {unknown}")
    chosen = None
    for candidate in sorted(spec["url"]["paths"], key=lambda p: -len(p.get("parts", {}))):
        parts = candidate.get("parts", {})
        if candidate.get("deprecated") or "{type}" in candidate["path"]:
            continue
        if all(name in args for name in parts):
            chosen = candidate
            break
    if chosen is None:
        raise Failure(f"no path of {api} fits {sorted(args)}")
    path = chosen["path"]
    for name in chosen.get("parts", {}):
        path = path.replace("{" + name + "}", quote(to_param(args.pop(name)), safe=","))
    methods = chosen["methods"]
    method = "POST" if body is not None and "POST" in methods else methods[0]
    if spec.get("body", {}).get("serialize") == "bulk" and body is not None:
        body = ndjson(body)
    params = {k: to_param(v) for k, v in args.items()}
    return call(method, path, params, body, headers)


def do(api, args, headers):
    if api in SPECS:
        return by_spec(api, args, headers)
    args = dict(args)
    if api == "index":
        index = quote(to_param(args.pop("index")), safe="")
        body = args.pop("body")
        params = {k: to_param(v) for k, v in args.items()}
        if "id" in params:
            path = f"/{index}/_doc/{quote(params.pop('id'), safe='')}"
            return call("PUT", path, params, body, headers)
        return call("POST", f"/{index}/_doc", params, body, headers)
    if api == "indices.create":
        return call("PUT", "/" + args.pop("index"), None, args.pop("body", None), headers)
    if api == "indices.delete":
        return call("DELETE", "/" + args.pop("index"), None, None, headers)
    if api == "cluster.health":
        return call("GET", "/_cluster/health", None, None, headers)
    if api == "indices.refresh":
        return 200, {"_shards": {"total": 1, "successful": 1, "failed": 0}}
    # The rest at the paths of OpenSearch's REST specification for them.
    if api in PATHS:
        method, template = PATHS[api]
        body = args.pop("body", None)
        path = template
        for name in re.findall(r"\{(\w+)\}", template):
            path = path.replace("{" + name + "}", quote(to_param(args.pop(name)), safe=","))
        params = {k: to_param(v) for k, v in args.items()}
        return call(method, path, params, body, headers)
    raise Failure(f"unsupported API {api}")


PATHS = {
    "indices.get": ("GET", "/{index}"),
    "indices.put_alias": ("PUT", "/{index}/_alias/{name}"),
    "indices.put_mapping": ("PUT", "/{index}/_mapping"),
    "indices.put_settings": ("PUT", "/{index}/_settings"),
    "indices.forcemerge": ("POST", "/{index}/_forcemerge"),
    "indices.stats": ("GET", "/{index}/_stats/{metric}"),
    "tasks.get": ("GET", "/_tasks/{task_id}"),
    "reindex_rethrottle": ("POST", "/_reindex/{task_id}/_rethrottle"),
    "update_by_query_rethrottle": ("POST", "/_update_by_query/{task_id}/_rethrottle"),
    "delete_by_query_rethrottle": ("POST", "/_delete_by_query/{task_id}/_rethrottle"),
}


# The parameters every API takes (the REST specification's _common.json).
COMMON_PARAMS = {"pretty", "human", "error_trace", "source", "filter_path"}


CATCHES = {
    "bad_request": 400, "unauthorized": 401, "forbidden": 403, "missing": 404,
    "request_timeout": 408, "conflict": 409, "unavailable": 503,
}


def resolve(value, stash):
    if isinstance(value, str):
        if value.startswith("$") and value[1:] in stash:
            return stash[value[1:]]
        return re.sub(r"\$\{?(\w+)\}?", lambda m: str(stash.get(m.group(1), m.group(0))), value)
    if isinstance(value, list):
        return [resolve(v, stash) for v in value]
    if isinstance(value, dict):
        return {resolve(k, stash): resolve(v, stash) for k, v in value.items()}
    return value


def lookup(body, path, stash):
    if path in ("", "$body"):
        return body
    value = body
    for part in re.split(r"(?<!\\)\.", path):
        part = resolve(part.replace("\\.", "."), stash)
        if isinstance(value, list):
            try:
                value = value[int(part)]
            except (ValueError, IndexError):
                return None
        elif isinstance(value, dict):
            if part not in value:
                return None
            value = value[part]
        else:
            return None
    return value


def same(expected, actual):
    if isinstance(expected, str) and len(expected) > 1 and expected.startswith("/") and expected.strip().endswith("/"):
        return actual is not None and re.search(expected.strip()[1:-1], str(actual), re.X) is not None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return float(expected) == float(actual)
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(same(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(same(e, a) for e, a in zip(expected, actual))
    if expected is None:
        return actual is None
    return expected == actual


def parse_version(text):
    text = text.strip()
    if not text:
        return None
    numbers = [int(p) if p.isdigit() else 99 for p in re.split(r"[.]", text)[:3]]
    return tuple(numbers + [0] * (3 - len(numbers)))


def check_skip(skip):
    features = skip.get("features", [])
    features = [features] if isinstance(features, str) else features
    missing = [f for f in features if f not in FEATURES]
    if missing:
        raise Skip(f"needs features {missing}")
    version = skip.get("version")
    if version is None:
        return
    if version.strip() == "all":
        raise Skip("skipped for all versions")
    for span in version.split(","):
        low, _, high = span.partition("-")
        low, high = parse_version(low), parse_version(high)
        if (low is None or low <= VERSION) and (high is None or VERSION <= high):
            raise Skip(f"skipped for versions {version}")


def strings_of(value):
    """Every string in a JSON value, depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from strings_of(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from strings_of(inner)


def run_steps(steps, state):
    for step in steps or []:
        (kind, arg), = step.items()
        stash = state["stash"]
        if kind == "skip":
            check_skip(arg)
        elif kind == "do":
            arg = dict(arg)
            catch = arg.pop("catch", None)
            headers = resolve(arg.pop("headers", {}), stash)
            for key in ("warnings", "allowed_warnings", "node_selector"):
                arg.pop(key, None)
            (api, args), = arg.items()
            try:
                status, body = do(api, resolve(args or {}, stash), headers)
            except ParamError as error:
                if catch != "param":
                    raise Failure(str(error)) from error
                continue
            state["last"] = body
            if catch == "param":
                raise Failure(f"{api}: expected a client-side parameter error, the request was sent")
            if catch is None:
                if status >= 400:
                    raise Failure(f"{api}: {status} {json.dumps(body)[:300]}")
            elif catch in CATCHES:
                if status != CATCHES[catch]:
                    raise Failure(f"{api}: expected {CATCHES[catch]} ({catch}), got {status} {json.dumps(body)[:200]}")
            elif catch == "request":
                if status < 400 or status in CATCHES.values():
                    raise Failure(f"{api}: expected an error status, got {status}")
            elif catch.startswith("/"):
                # The pattern is for the error's text: match it against the body as JSON, and
                # against its strings as they read (JSON escapes the quotes in `"auto"`).
                pattern = catch.strip("/")
                found = re.search(pattern, json.dumps(body)) or re.search(pattern, "\n".join(strings_of(body)))
                if status < 400 or not found:
                    raise Failure(f"{api}: expected an error matching {catch}, got {status} {json.dumps(body)[:200]}")
            else:
                raise Failure(f"unsupported catch {catch}")
        elif kind == "match":
            (path, expected), = arg.items()
            actual = lookup(state["last"], path, stash)
            if not same(resolve(expected, stash), actual):
                raise Failure(f"match {path}: expected {json.dumps(expected)[:150]}, got {json.dumps(actual)[:150]}")
        elif kind == "length":
            (path, expected), = arg.items()
            actual = lookup(state["last"], path, stash)
            if actual is None or len(actual) != resolve(expected, stash):
                raise Failure(f"length {path}: expected {expected}, got {json.dumps(actual)[:150]}")
        elif kind in ("is_true", "is_false"):
            actual = lookup(state["last"], arg, stash)
            truthy = actual not in (None, False, 0, "", [], {})
            if truthy != (kind == "is_true"):
                raise Failure(f"{kind} {arg}: got {json.dumps(actual)[:150]}")
        elif kind in ("gt", "gte", "lt", "lte"):
            (path, expected), = arg.items()
            actual = lookup(state["last"], path, stash)
            expected = resolve(expected, stash)
            ok = isinstance(actual, (int, float)) and {
                "gt": actual > expected, "gte": actual >= expected,
                "lt": actual < expected, "lte": actual <= expected,
            }[kind]
            if not ok:
                raise Failure(f"{kind} {path} {expected}: got {actual}")
        elif kind == "set":
            (path, name), = arg.items()
            stash[name] = lookup(state["last"], path, stash)
        else:
            raise Failure(f"unsupported step {kind}")


def clean():
    status, datasets = call("GET", "/metadata")
    if status == 200:
        for dataset in datasets:
            call("DELETE", "/" + dataset["index"])


def main():
    results = []
    for file in sorted((SUITE / "test").glob("*/*.yml")):
        documents = [d for d in yaml.load_all(file.read_text(), Loader=Loader) if d]
        setup = next((d["setup"] for d in documents if "setup" in d), None)
        teardown = next((d["teardown"] for d in documents if "teardown" in d), None)
        for document in documents:
            (name, steps), = document.items()
            if name in ("setup", "teardown"):
                continue
            test = f"{file.parent.name}/{file.name}: {name}"
            if ONLY and ONLY not in test:
                continue
            state = {"stash": {}, "last": None}
            try:
                run_steps(setup, state)
                state = {"stash": {}, "last": None}
                run_steps(steps, state)
                run_steps(teardown, state)
                results.append({"test": test, "outcome": "passed"})
            except Skip as reason:
                results.append({"test": test, "outcome": "skipped", "reason": str(reason)})
            except Failure as reason:
                results.append({"test": test, "outcome": "failed", "reason": str(reason)})
            except Exception as error:  # a step the runner could not read
                results.append({"test": test, "outcome": "failed", "reason": f"runner: {error!r}"})
            finally:
                clean()
    passed = sum(r["outcome"] == "passed" for r in results)
    skipped = sum(r["outcome"] == "skipped" for r in results)
    total = len(results) - skipped
    for r in results:
        if r["outcome"] == "failed":
            print(f"FAIL {r['test']}: {r['reason']}")
    print(f"opensearch yaml: {passed}/{total} passed ({skipped} skipped by the suite's own skip rules)")
    if "STRATA_YAML_RESULTS" in os.environ:
        Path(os.environ["STRATA_YAML_RESULTS"]).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.exit(main())

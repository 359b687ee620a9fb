"""Holds strata to its API description: schemathesis generates requests for every operation of
docs/openapi.yaml, sends them to a live server and checks each answer with exactly two of its
checks, not_a_server_error and response_schema_conformance. Failures are collected, not fatal:
they are grouped by (operation, check, short message), each group with one request that
reproduces it, printed as a summary and, when STRATA_SCHEMATHESIS_REPORT names a file, written
there as JSON (the source of the table in docs/compat.md). Exit status 1 if anything failed.

Run by tests/schemathesis.rs, which starts the real binary, makes an account with a data-plane
key and a platform root user, and sets:

    STRATA_DATA_URL, STRATA_DATA_KEY          the data-plane listener and a key (Bearer)
    STRATA_PLATFORM_URL, STRATA_ACCESS_KEY,   the platform listener and the root user's key
    STRATA_SECRET_KEY                         pair (botocore's SigV4Auth, as sigv4_client.py)
    STRATA_CA_FILE                            over HTTPS, the certificate to trust (optional)

and optionally:

    STRATA_OPENAPI                     the description (default docs/openapi.yaml; argv[1] wins)
    STRATA_SCHEMATHESIS_EXAMPLES       generated requests per operation (default 5)
    STRATA_SCHEMATHESIS_SEED           a Hypothesis seed (an integer, or "random"); unset, the
                                       run is derandomized: the same requests every time (CI)
    STRATA_SCHEMATHESIS_REPORT         where to write the JSON report
    STRATA_SCHEMATHESIS_OPERATIONS     a regular expression: only operations whose label
                                       ("GET /v1/changes/{database}") it matches (for debugging;
                                       the summary says how many were left out)
    STRATA_SCHEMATHESIS_STREAM_SECONDS how long to read an event stream (default 2)

By hand, against a server of your own: the same variables, then
    ~/.cache/strata/venv/bin/python tests/clients/schemathesis_run.py docs/openapi.yaml

Which listener and which credentials an operation gets come from the description itself: its
`servers` (the platform listener is the one on port 7080; every operation tagged `platform` is
there) and its `security` (`sigv4`: signed, `api_key`/`api_key_header`: the Bearer key, none:
sent as is). Credentials schemathesis generates for those schemes are replaced by real ones.
Each request is prepared by `requests` from the case's transport arguments and, for the
platform, signed last, over the exact method, URL, headers and body bytes that are sent.

Every operation gets, in order: one request per example the description gives
(`get_strategies_from_examples`), then N generated ones (`as_strategy`, positive data). Half of
the generated requests, on average, have their `database` or `dataset` path parameter set to
the fixtures this script creates first (a database `schemathesis` with a table `docs`, a
dataset `schemathesis`), so that they reach real data rather than 404 alone. Operations that
delete run last so the fixtures live through the rest.

Event streams (text/event-stream, GET /v1/changes/...) never end by themselves: the body is
read for STRATA_SCHEMATHESIS_STREAM_SECONDS, cut after the last complete event and handed to
schemathesis marked as cut short; it then checks every complete event against the response
schema (for OpenAPI before 3.2, `schema` describes one event) and nothing about the stream's
length. The report counts the events so checked.

One kind of 5xx does not fail the run: the specification answers 500 for a connection error of
a connection operation, which the description documents as SourceFailed; the description's own
examples create a connection to a host that does not exist. Such answers are listed apart, as
allowed; an internal error on the same operations still fails."""

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

import hypothesis
import pyarrow.ipc
import requests
import schemathesis
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import response_schema_conformance
from urllib3.exceptions import ReadTimeoutError

CHECKS = (not_a_server_error, response_schema_conformance)
PLATFORM_PORT = 7080  # the port of the platform listener in the description's `servers`
CONNECT_TIMEOUT = 5
RESPONSE_SECONDS = 30  # a whole non-stream answer, headers to last byte
MAX_BODY = 64 * 1024 * 1024
CUT = 400  # characters of a body kept in the report
TEXT_TYPES = ("application/json", "text/", "application/yaml", "application/x-ndjson")
# The specification (../shared/spec, platform, "Errors") answers 500 for a connection error of a
# connection operation (network, invalid host); the description calls that response
# SourceFailed. Such a 500 is listed as allowed, apart from the failures, and does not fail the
# run; an internal error (its message says so) on the same operation still does.
SOURCE_FAILED = "#/components/responses/SourceFailed"
INTERNAL_MESSAGE = "internal error; the server log has the details"
# Of schemathesis' warnings about the description, these mean a part of it is unusable: they
# fail the run. The others (a media type it cannot read, say) are listed as notes.
FAILING_WARNINGS = {"unresolvable_reference", "unsupported_regex"}

FIXTURE_DATABASE = "schemathesis"
FIXTURE_TABLE = "docs"
FIXTURE_DATASET = "schemathesis"
FIXTURE_PATH_PARAMETERS = {"database": FIXTURE_DATABASE, "dataset": FIXTURE_DATASET}


@schemathesis.serializer("application/x-ndjson", "application/x-protobuf")
def as_is(_context, value):
    """Bulk and msearch NDJSON and remote-write protobuf are described as strings (binary for
    protobuf); schemathesis has no serializer for them, so the generated value is the body."""
    if isinstance(value, bytes):
        return value
    if isinstance(getattr(value, "data", None), bytes):  # schemathesis' Binary
        return value.data
    return (value if isinstance(value, str) else json.dumps(value)).encode("utf-8")


@schemathesis.deserializer("application/vnd.apache.arrow.stream")
def arrow_stream(_context, response):
    """Arrow IPC answers (the data plane's rows) are described as binary strings: read whole
    with pyarrow, so that one that is not an Arrow stream fails; then the bytes, as a string."""
    pyarrow.ipc.open_stream(response.content).read_all()
    return response.content.decode("latin-1")


@dataclass
class Target:
    """Where and how one operation's requests go."""

    listener: str  # "data" or "platform"
    url: str
    auth: str | None  # "bearer", "sigv4" or None


@dataclass
class Group:
    operation: str
    check: str
    message: str
    count: int = 0
    example: dict = field(default_factory=dict)


@dataclass
class Stats:
    listener: str
    requests: int = 0
    statuses: Counter = field(default_factory=Counter)
    events: int = 0  # event-stream events checked


class Run:
    def __init__(self, options):
        self.options = options
        self.session = requests.Session()
        self.session.headers.clear()  # the case's own headers, nothing of the session's
        self.credentials = Credentials(options.access_key, options.secret_key)
        self.groups: dict[tuple[str, str, str], Group] = {}
        self.allowed: dict[tuple[str, str, str], Group] = {}
        self.notes: list[str] = []
        self.stats: dict[str, Stats] = {}

    # --- failures -------------------------------------------------------------------------

    def fail(self, operation, check, message, example, allowed=False):
        groups = self.allowed if allowed else self.groups
        key = (operation, check, message)
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(operation, check, message, example=example)
        group.count += 1

    @staticmethod
    def source_failed(raw, operation, response) -> bool:
        """Whether a 5xx is the specification's 500 for a source that failed (SOURCE_FAILED).
        A HEAD answer has no message to tell it from an internal error: it is taken as the GET
        of the same path documents it, and that GET is checked with its message."""
        path_item = raw["paths"][operation.path]
        method = operation.method.lower()
        definition = path_item.get("get", {}) if method == "head" else path_item[method]
        documented = definition.get("responses", {}).get(str(response.status_code), {})
        if documented.get("$ref") != SOURCE_FAILED:
            return False
        if method == "head":
            return True
        try:
            message = json.loads(response.content)["message"]
        except (ValueError, KeyError, TypeError):
            return False
        return isinstance(message, str) and INTERNAL_MESSAGE not in message

    # --- sending --------------------------------------------------------------------------

    def target(self, raw, operation) -> Target:
        path_item = raw["paths"][operation.path]
        definition = path_item[operation.method.lower()]
        servers = definition.get("servers") or path_item.get("servers") or raw.get("servers") or []
        ports = {urlsplit(server["url"]).port for server in servers}
        on_platform = PLATFORM_PORT in ports or "platform" in definition.get("tags", [])
        security = definition.get("security", raw.get("security", []))
        schemes = {name for requirement in security for name in requirement}
        if "sigv4" in schemes:
            auth = "sigv4"
        elif schemes & {"api_key", "api_key_header"}:
            auth = "bearer"
        else:
            auth = None
        if on_platform:
            return Target("platform", self.options.platform_url, auth)
        return Target("data", self.options.data_url, auth)

    def prepare(self, target: Target, kwargs) -> requests.PreparedRequest:
        """The request as it goes on the wire, with real credentials, signed last."""
        headers = requests.structures.CaseInsensitiveDict(kwargs.pop("headers", {}))
        # Values schemathesis generated for the security schemes are not credentials.
        for name in ("Authorization", "x-api-key", "X-Amz-Date", "X-Amz-Security-Token"):
            headers.pop(name, None)
        if target.auth == "bearer":
            headers["Authorization"] = f"Bearer {self.options.data_key}"
        request = requests.Request(headers=dict(headers), **kwargs)
        prepared = self.session.prepare_request(request)
        if target.auth == "sigv4":
            self.sign(prepared)
        return prepared

    def sign(self, prepared: requests.PreparedRequest):
        """Signs with botocore as sigv4_client.py does. botocore signs the query as it finds it
        in the URL, so the query is first spelled the way the AWS SDKs send it (`%20`, not
        `+`, for a space), which is also how the server rebuilds it; it means the same."""
        url = urlsplit(prepared.url)
        if url.query:
            # surrogateescape: bytes that are not UTF-8 go through unchanged
            pairs = parse_qsl(url.query, keep_blank_values=True, errors="surrogateescape")
            query = "&".join(f"{sigv4_quote(k)}={sigv4_quote(v)}" for k, v in pairs)
            prepared.url = urlunsplit(url._replace(query=query))
        body = prepared.body
        if isinstance(body, str):
            body = body.encode("utf-8")
            prepared.body = body
            prepared.headers["Content-Length"] = str(len(body))
        signing = AWSRequest(
            method=prepared.method, url=prepared.url, data=body or b"", headers=dict(prepared.headers)
        )
        SigV4Auth(self.credentials, "strata", "us-east-1").add_auth(signing)
        for name in ("Authorization", "X-Amz-Date"):
            prepared.headers[name] = signing.headers[name]

    def send(self, prepared: requests.PreparedRequest, streams=False) -> schemathesis.Response:
        """Sends and reads the answer. `streams`: the operation may answer an event stream,
        which is read for stream_seconds only (each read waits at most that long too)."""
        stream_seconds = self.options.stream_seconds
        started = time.monotonic()
        self.session.cookies.clear()
        response = self.session.send(
            prepared,
            stream=True,
            allow_redirects=False,
            verify=self.options.verify,
            timeout=(CONNECT_TIMEOUT, stream_seconds if streams else RESPONSE_SECONDS),
        )
        try:
            event_stream = is_event_stream(response.headers.get("content-type"))
            deadline = started + (stream_seconds if event_stream else RESPONSE_SECONDS)
            content, cut_short = read_bounded(response.raw, deadline, event_stream)
            if cut_short and not event_stream:
                raise TimeoutError(f"no end of the answer within {RESPONSE_SECONDS}s and {MAX_BODY} bytes")
            if cut_short:
                content = complete_events(content)
            raw_headers = response.raw.headers
            return schemathesis.Response(
                status_code=response.status_code,
                headers={name: raw_headers.getlist(name) for name in raw_headers},
                content=content,
                request=prepared,
                elapsed=time.monotonic() - started,
                verify=bool(self.options.verify),
                message=response.reason or "",
                encoding=response.encoding,
                http_version="1.0" if response.raw.version == 10 else "1.1",
                stream_cut_short=cut_short,
            )
        finally:
            response.close()

    def call(self, target: Target, method, path, body=None, content_type="application/json"):
        """A plain request of this script's own (fixtures), through the same auth path."""
        headers = {"Content-Type": content_type, "Accept": "application/json"} if body else {}
        kwargs = {"method": method, "url": target.url + path, "headers": headers, "data": body}
        return self.send(self.prepare(target, kwargs))

    # --- fixtures -------------------------------------------------------------------------

    def fixtures(self):
        data = Target("data", self.options.data_url, "bearer")
        platform = Target("platform", self.options.platform_url, "sigv4")
        rows = [{"title": "the quick brown fox", "n": 1}, {"title": "a lazy dog", "n": 2}]
        records = [
            {"@timestamp": "2026-11-28T10:00:00Z", "level": "error", "message": "disk full", "n": 1},
            {"@timestamp": "2026-11-28T10:01:00Z", "level": "info", "message": "disk ok", "n": 2},
        ]
        bulk = "".join(
            json.dumps({"index": {"_id": str(i)}}) + "\n" + json.dumps(record) + "\n"
            for i, record in enumerate(records)
        )
        steps = [
            (data, "POST", "/v1/databases", {"name": FIXTURE_DATABASE}, [201, 409]),
            (
                data,
                "POST",
                f"/v1/create_table/{FIXTURE_DATABASE}",
                {
                    "name": FIXTURE_TABLE,
                    "schema": [
                        {"name": "title", "type": "utf8", "nullable": True},
                        {"name": "n", "type": "int64", "nullable": True},
                    ],
                    "fts_columns": ["title"],
                    "exact_columns": ["n"],
                },
                [200, 409],
            ),
            (data, "POST", f"/v1/append/{FIXTURE_DATABASE}?table={FIXTURE_TABLE}", {"data": rows}, [200]),
            (platform, "POST", f"/{FIXTURE_DATASET}/json", bulk, [200]),
        ]
        for target, method, path, body, expected in steps:
            text = body if isinstance(body, str) else json.dumps(body)
            content_type = "application/x-ndjson" if isinstance(body, str) else "application/json"
            label = f"{method} {path}"
            try:
                response = self.call(target, method, path, text, content_type)
            except (requests.RequestException, ReadTimeoutError, TimeoutError) as exc:
                self.fail("fixtures", "setup", f"{label}: {exc}", {})
                continue
            if response.status_code not in expected:
                self.fail(
                    "fixtures",
                    "setup",
                    f"{label}: expected {expected}, got {response.status_code}",
                    {"body": cut_text(response.content)},
                )

    # --- operations -----------------------------------------------------------------------

    def cases(self, operation):
        """The description's examples, then N generated cases."""
        fixed = {
            name: value
            for name, value in FIXTURE_PATH_PARAMETERS.items()
            if operation.path_parameters.get(name) is not None
        }
        cases = []
        examples = operation.get_strategies_from_examples(**({"path_parameters": fixed} if fixed else {}))
        for strategy in examples:
            cases.extend(self.draw(strategy, 1))
        generated = operation.as_strategy()
        if fixed:
            generated = st.one_of(generated, operation.as_strategy(path_parameters=fixed))
        cases.extend(self.draw(generated, self.options.examples))
        return cases

    def draw(self, strategy, n):
        drawn = []

        @settings(
            max_examples=n,
            derandomize=self.options.seed is None,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
        )
        @hypothesis.given(strategy)
        def collect(case):
            drawn.append(case)

        if self.options.seed is not None:
            collect = hypothesis.seed(self.options.seed)(collect)
        collect()
        return drawn

    def run_operation(self, raw, operation):
        label = operation.label
        target = self.target(raw, operation)
        stats = self.stats.setdefault(label, Stats(listener=target.listener))
        try:
            cases = self.cases(operation)
        except Exception as exc:  # noqa: BLE001 - any generation error is a failure of the description
            self.fail(label, "generation", first_line(exc), {})
            return
        if not cases:
            self.fail(label, "generation", "no request could be generated", {})
        streams = answers_event_stream(operation)
        for case in cases:
            try:
                kwargs = case.as_transport_kwargs(base_url=target.url)
                prepared = self.prepare(target, kwargs)
            except Exception as exc:  # noqa: BLE001
                self.fail(label, "serialization", first_line(exc), {"case": repr(case)[:CUT]})
                continue
            stats.requests += 1
            try:
                response = self.send(prepared, streams)
            except (requests.RequestException, ReadTimeoutError, TimeoutError) as exc:
                self.fail(label, "transport", first_line(exc), request_example(prepared))
                continue
            stats.statuses[response.status_code] += 1
            if is_event_stream(first(response.headers.get("content-type"))):
                stats.events += count_events(response.content)
            for check in CHECKS:
                try:
                    case.validate_response(response, checks=[check])
                except FailureGroup as group:
                    for failure in group.exceptions:
                        message = f"{response.status_code}: {short(failure)}"
                        example = request_example(prepared, response)
                        example["failure"] = str(failure.message)[: 2 * CUT]
                        allowed = check is not_a_server_error and self.source_failed(
                            raw, operation, response
                        )
                        self.fail(label, check.__name__, message, example, allowed)
                except Exception as exc:  # noqa: BLE001 - a check that cannot run is a failure too
                    example = request_example(prepared, response)
                    self.fail(label, check.__name__, f"check error: {first_line(exc)}", example)

    def run(self):
        started = time.monotonic()
        try:
            schema = schemathesis.openapi.from_path(self.options.spec, config=schemathesis.Config())
        except Exception as exc:  # noqa: BLE001 - a description that does not load fails the run
            self.fail(self.options.spec, "schema", first_line(exc), {})
            return self.summary(0, 0, 0, time.monotonic() - started)
        raw = schema.raw_schema
        operations, described, left_out = [], 0, 0
        only = re.compile(self.options.only) if self.options.only else None
        try:
            # The description as a whole: valid OpenAPI, and what schemathesis warns of.
            try:
                schema.validate()
            except Exception as exc:  # noqa: BLE001 - jsonschema_rs.ValidationError
                where = "/".join(map(str, getattr(exc, "instance_path", [])))
                detail = {"detail": cut_text(str(exc))}
                self.fail("description", "schema", f"not valid OpenAPI at {where}", detail)
            for warning in schema.iter_schema_warnings():
                text = f"{warning.kind}: {warning.message}"
                text += f" ({warning.group})" if warning.group else ""
                if str(warning.kind) in FAILING_WARNINGS:
                    self.fail(warning.operation_label or "description", "schema", text, {})
                else:
                    self.notes.append(f"{warning.operation_label or 'description'}: {text}")
            for result in schema.get_all_operations():
                described += 1
                if not isinstance(result, Ok):
                    error = result.err()
                    method = (getattr(error, "method", None) or "?").upper()
                    label = f"{method} {getattr(error, 'path', None) or '?'}"
                    self.fail(label, "schema", first_line(error), {})
                    continue
                operation = result.ok()
                if only and not only.search(operation.label):
                    left_out += 1
                    continue
                operations.append(operation)
        except Exception as exc:  # noqa: BLE001 - a description schemathesis cannot read at all
            self.fail("description", "schema", first_line(exc), {"detail": cut_text(str(exc))})
            return self.summary(described, 0, left_out, time.monotonic() - started)
        self.fixtures()
        # Deleting operations last, so the fixtures live through every other operation.
        operations.sort(key=destructive)
        for operation in operations:
            self.run_operation(raw, operation)
        return self.summary(described, len(operations), left_out, time.monotonic() - started)

    # --- report ---------------------------------------------------------------------------

    def summary(self, described, ran, left_out, seconds):
        requests_sent = sum(stats.requests for stats in self.stats.values())
        failures = sum(group.count for group in self.groups.values())

        def order(groups):
            return sorted(groups.values(), key=lambda g: (g.operation, g.check, g.message))

        groups, allowed = order(self.groups), order(self.allowed)
        reached_2xx = sum(
            1 for stats in self.stats.values() if any(200 <= status < 300 for status in stats.statuses)
        )
        totals = {
            "operations_described": described,
            "operations_run": ran,
            "operations_left_out": left_out,
            "operations_with_2xx": reached_2xx,
            "requests": requests_sent,
            "failures": failures,
            "groups": len(groups),
            "allowed": sum(group.count for group in allowed),
            "seconds": round(seconds, 1),
        }
        print(
            f"schemathesis {schemathesis.__version__}: {ran} of {described} operations"
            + (f" ({left_out} left out by STRATA_SCHEMATHESIS_OPERATIONS)" if left_out else "")
            + f", {requests_sent} requests ({reached_2xx} operations answered 2xx at least once),"
            f" {failures} failures in {len(groups)} groups, {seconds:.0f}s ({self.describe_seed()})"
        )
        for group in groups:
            print_group(group)
        if self.notes:
            print("\nNotes (schemathesis' warnings about the description; they fail nothing):")
            for note in self.notes:
                print(f"    {note}")
        if allowed:
            print(f"\nAllowed: the specification's 500 for a failing source ({SOURCE_FAILED}):")
            for group in allowed:
                print_group(group)
        if self.options.report:
            report = {
                "schemathesis": schemathesis.__version__,
                "hypothesis": hypothesis.__version__,
                "description": self.options.spec,
                "examples_per_operation": self.options.examples,
                "seed": self.describe_seed(),
                "checks": [check.__name__ for check in CHECKS],
                "totals": totals,
                "groups": [group.__dict__ for group in groups],
                "allowed": [group.__dict__ for group in allowed],
                "notes": self.notes,
                "operations": {
                    label: {
                        "listener": stats.listener,
                        "requests": stats.requests,
                        "statuses": {str(k): v for k, v in sorted(stats.statuses.items())},
                        **({"events": stats.events} if stats.events else {}),
                    }
                    for label, stats in sorted(self.stats.items())
                },
            }
            with open(self.options.report, "w", encoding="utf-8") as file:
                json.dump(report, file, indent=2, default=str)
                file.write("\n")
        return 1 if groups else 0

    def describe_seed(self):
        return "derandomized" if self.options.seed is None else f"seed {self.options.seed}"


# --- helpers --------------------------------------------------------------------------------


def print_group(group):
    print(f"\n[{group.count}x] {group.operation} | {group.check} | {group.message}")
    for key in ("request", "status", "response", "detail"):
        if key in group.example:
            print(f"    {key}: {group.example[key]}")


def destructive(operation):
    """Sort key: 1 for operations that delete (method DELETE, drop_table, delete rows, delete by
    query), 0 for the rest; sorting is stable, so the description's order holds otherwise."""
    segments = operation.path.split("/")
    deletes = operation.method.upper() == "DELETE" or any(
        segment in ("drop_table", "delete", "_delete_by_query") for segment in segments
    )
    return 1 if deletes else 0


def answers_event_stream(operation):
    """Whether any response the description documents for the operation is an event stream."""
    responses = operation.definition.raw.get("responses", {})
    return any(
        is_event_stream(media_type)
        for response in responses.values()
        for media_type in (response.get("content") or {})
    )


def is_event_stream(content_type):
    return bool(content_type) and content_type.split(";")[0].strip().lower() == "text/event-stream"


def read_bounded(raw, deadline, event_stream):
    """The body, read until it ends, the deadline passes or MAX_BODY bytes; and whether it was
    cut short. An event stream is cut short, not failed, by a read that times out."""
    content = bytearray()
    while time.monotonic() < deadline and len(content) <= MAX_BODY:
        try:
            chunk = raw.read1(64 * 1024, decode_content=True)
        except ReadTimeoutError:
            if event_stream:
                return bytes(content), True
            raise
        if not chunk:
            return bytes(content), False
        content += chunk
    return bytes(content), True


def complete_events(content: bytes) -> bytes:
    """An event stream cut short, without the event still arriving."""
    ends = [m.end() for m in re.finditer(rb"(\r\n|\r|\n)(\r\n|\r|\n)", content)]
    return content[: ends[-1]] if ends else b""


def count_events(content: bytes) -> int:
    blocks = re.split(rb"(?:\r\n|\r|\n)(?:\r\n|\r|\n)", content)
    return sum(1 for block in blocks if re.search(rb"(^|\n)data(:|$)", block))


def sigv4_quote(text):
    return quote(text, safe="-_.~", errors="surrogateescape")


def first(values):
    return values[0] if values else None


def first_line(value) -> str:
    text = str(value).strip()
    return (text.splitlines() or [type(value).__name__])[0][:200]


def short(failure) -> str:
    """A failure's stable name: its title and, for a schema violation, the schema keyword path
    that failed (the value that failed is in the example)."""
    schema_path = getattr(failure, "schema_path", None)
    if schema_path:
        return f"{failure.title} at {'/'.join(map(str, schema_path))}"
    message = re.sub(r"\d+", "N", first_line(failure.message)) if failure.message else ""
    return f"{failure.title}: {message}" if message else failure.title


def cut_text(content) -> str:
    if not content:
        return ""
    text = content.decode("utf-8", errors="replace") if isinstance(content, bytes) else str(content)
    return text if len(text) <= CUT else text[:CUT] + f"... ({len(text)} characters)"


def request_example(prepared, response=None):
    url = urlsplit(prepared.url)
    example = {"request": f"{prepared.method} {url.path}{'?' + url.query if url.query else ''}"}
    if prepared.body:
        example["request_body"] = cut_text(prepared.body)
    if response is not None:
        example["status"] = response.status_code
        content_type = first(response.headers.get("content-type")) or ""
        if content_type.startswith(TEXT_TYPES):
            example["response"] = cut_text(response.content)
        else:
            example["response"] = f"<{len(response.content)} bytes of {content_type or 'no type'}>"
    return example


def options():
    env = os.environ
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", nargs="?", default=env.get("STRATA_OPENAPI", "docs/openapi.yaml"))
    examples = int(env.get("STRATA_SCHEMATHESIS_EXAMPLES", "5"))
    parser.add_argument("--examples", type=int, default=examples)
    parser.add_argument("--seed", default=env.get("STRATA_SCHEMATHESIS_SEED"))
    parser.add_argument("--report", default=env.get("STRATA_SCHEMATHESIS_REPORT"))
    parser.add_argument("--only", default=env.get("STRATA_SCHEMATHESIS_OPERATIONS"))
    stream_seconds = float(env.get("STRATA_SCHEMATHESIS_STREAM_SECONDS", "2"))
    parser.add_argument("--stream-seconds", type=float, default=stream_seconds)
    parsed = parser.parse_args()
    if parsed.seed == "random":
        parsed.seed = int.from_bytes(os.urandom(4), "big")
    elif parsed.seed is not None:
        parsed.seed = int(parsed.seed)
    try:
        parsed.data_url = env["STRATA_DATA_URL"].rstrip("/")
        parsed.data_key = env["STRATA_DATA_KEY"]
        parsed.platform_url = env["STRATA_PLATFORM_URL"].rstrip("/")
        parsed.access_key = env["STRATA_ACCESS_KEY"]
        parsed.secret_key = env["STRATA_SECRET_KEY"]
    except KeyError as missing:
        parser.error(f"{missing.args[0]} is not set")
    parsed.verify = env.get("STRATA_CA_FILE", True)
    return parsed


if __name__ == "__main__":
    sys.exit(Run(options()).run())

"""Prints docs/compat.md's OpenSearch YAML section from the runner's results (JSON), failures
grouped by cause. Usage: STRATA_YAML_RESULTS=/tmp/r.json STRATA_TEST_PYTHON=... cargo test
--test opensearch_yaml, then python3 tests/clients/opensearch_yaml_report.py /tmp/r.json."""

import json
import re
import sys
from collections import Counter, defaultdict

CAUSES = [
    (r"unknown query \[(\w+)\]", "query type `{}` not served yet"),
    (r"Unknown key for a search body \[(\w+)\]", "search body key `{}` not served yet"),
    (r"unsupported API ([\w.]+)", "API `{}` not served"),
    (r"field type \[(\w+)\]", "mapping type `{}` not served yet"),
    (r"aggregation type \[(\w+)\]", "aggregation `{}` not served yet"),
    (r"unrecognized parameter: \[(\w+)\]", "query parameter `{}` not served yet"),
    (r"calendar_interval \[(\w+)\]", "calendar interval `{}` not served yet"),
]


def cause(reason):
    for pattern, text in CAUSES:
        found = re.search(pattern, reason)
        if found:
            return text.format(found.group(1))
    if re.search(r"expected an error matching|expected (400|404|409|503)|expected an error status", reason):
        return ("a validation Elasticsearch makes is not made, or is worded otherwise (slices, max_docs, "
                "requests_per_second, scroll_size, conflicts, negative from, script_fields, "
                "docvalue_fields, regex length, rescore window, ...)")
    if "unsupported catch" in reason:
        return "the runner does not implement `catch: param` (a client-side check)"
    if "update" in reason:
        return "the bulk `update` action is refused (records are replaced whole with index)"
    if re.search(r"task|slices|batches", reason):
        return "delete by query runs at once, in one batch: no tasks or slices"
    if "matched_queries" in reason:
        return "`_name` is accepted, but matched_queries are not reported"
    if ".meta." in reason:
        return "an aggregation's `meta` is not echoed"
    if "no such index" in reason:
        return "a missing dataset's reason reads `dataset \"x\" does not exist`, not `no such index [x]`"
    if "responses.0.hits.total" in reason:
        return "`rest_total_hits_as_int` is not applied inside msearch"
    return "the answer differs"


def main(path):
    results = json.load(open(path))
    files = defaultdict(Counter)
    for result in results:
        files[result["test"].split(":")[0]][result["outcome"]] += 1
    groups = defaultdict(list)
    for result in results:
        if result["outcome"] == "failed":
            groups[cause(result["reason"])].append(result)
    passed = sum(r["outcome"] == "passed" for r in results)
    skipped = sum(r["outcome"] == "skipped" for r in results)
    total = len(results) - skipped
    print(f"**{passed} of {total} pass** ({100 * passed / total:.0f}%; {skipped} more are skipped by "
          "their own skip rules).\n")
    print("| file | passed | failed | skipped |")
    print("|---|---|---|---|")
    for name in sorted(files):
        counts = files[name]
        print(f"| {name} | {counts['passed']} | {counts['failed']} | {counts['skipped']} |")
    print("\n### Failures, by cause\n")
    for text, failures in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"**{text}** ({len(failures)}):")
        for failure in failures:
            reason = failure["reason"].replace("|", "\\|").replace("\n", " ")
            if len(reason) > 150:
                reason = reason[:150] + "…"
            print(f"- {failure['test']}: {reason}")
        print()


if __name__ == "__main__":
    main(sys.argv[1])

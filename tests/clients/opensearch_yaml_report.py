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

# Failures whose cause their test's name or reason names.
SPECIFIC = [
    (r"_stats/fielddata|_forcemerge|fielddata.memory_size_in_bytes",
     "global ordinals and `indices.forcemerge` are Lucene's: no field data is loaded onto the heap (its memory is 0), and segments are not merged on request"),
    (r"optimized_segments|leaf_visited",
     "the profile's `filter rewrite` counters describe OpenSearch's own optimisation, which strata does not make"),
    (r"profile.*(MapStringTermsAggregator|ordinals_collectors_used|deferred_aggregators|hybrid)",
     "the profile names strata's aggregators: string terms and cardinality read term ordinals (Elasticsearch's `map` and hybrid collectors are not strata's), and sub-aggregations are not deferred"),
    (r"IP test: search: expected an error status, got 400",
     "Elasticsearch answers a regular expression on an IP field's terms with a 500; strata with a 400"),
    (r"version conflict",
     "records have no versions: a delete by query meets no version conflicts"),
    (r"\.tasks",
     "an ended task is kept in the memory of its node, not as a record of a `.tasks` index"),
    (r"auto slice",
     "`slices=auto` is one slice: a dataset has one partition whatever `number_of_shards` says"),
]

def cause(reason):
    for pattern, text in SPECIFIC:
        if re.search(pattern, reason):
            return text
    for pattern, text in CAUSES:
        found = re.search(pattern, reason)
        if found:
            return text.format(found.group(1))
    if "stack_trace" in reason:
        return "`error_trace` stack traces are Java's: none are given"
    if "conflict" in reason:
        return "records have no versions: a delete by query meets no version conflicts"
    if re.search(r"expected an error matching|expected (400|404|409|503)|expected an error status", reason):
        return ("a check Elasticsearch makes is not made, or is worded otherwise (a bulk action's "
                "`_version` answered as a missing index)")
    if "unsupported catch" in reason:
        return "the runner does not implement `catch: param` (a client-side check)"
    if "outside the dates an index holds" in reason:
        return "dates past 2262 are refused (a document index keeps nanoseconds in 64 bits)"
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
            groups[cause(result["test"] + ": " + result["reason"])].append(result)
    passed = sum(r["outcome"] == "passed" for r in results)
    skipped = sum(r["outcome"] == "skipped" for r in results)
    total = len(results) - skipped
    print(f"**{passed} of {total} pass** ({100 * passed / total:.1f}%; {skipped} more are skipped by "
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

"""`python -m croniq_runner.conformance --server URL --token T [--case NAME] [--json]`.

Prints one line per case and exits 0 when none failed, 1 when one did,
2 on a usage error.
"""

import argparse
import json
import os
import sys

import requests

from croniq_runner.conformance.replay import DEFAULT_LABEL, Config, load_cases, run_case


def parse(argv):
    parser = argparse.ArgumentParser(
        prog="python -m croniq_runner.conformance",
        description="Replay the runner protocol's conformance cases against a live server.",
    )
    env = os.environ.get
    parser.add_argument("--server", default=env("CRONIQ_SERVER"), help="e.g. http://host:8000")
    parser.add_argument("--token", default=env("CRONIQ_TOKEN"), help="a runner token")
    parser.add_argument(
        "--second-token",
        default=env("CRONIQ_CONFORMANCE_SECOND_TOKEN"),
        help="another runner token, for the credential-binding case",
    )
    parser.add_argument(
        "--operator",
        default=env("CRONIQ_CONFORMANCE_OPERATOR"),
        help="a command run as `CMD ACTION JSON` for operator acts (cancel)",
    )
    parser.add_argument(
        "--label",
        default=DEFAULT_LABEL,
        help=f"the label of the job that gives the suite work (default {DEFAULT_LABEL})",
    )
    parser.add_argument("--case", action="append", help="run only this case (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    if not args.list and not (args.server and args.token):
        parser.error("--server and --token are required (or CRONIQ_SERVER, CRONIQ_TOKEN)")
    return parser, args


def select(cases, names, parser):
    if not names:
        return cases
    known = {case["name"]: case for case in cases}
    unknown = [name for name in names if name not in known]
    if unknown:
        parser.error(f"unknown case {unknown[0]!r} (see --list)")
    return [known[name] for name in names]


def line(result):
    text = f"{result.outcome.upper():4} {result.name}"
    if result.outcome == "pass":
        return f"{text} ({result.seconds:.2f}s)"
    return f"{text}: {result.reason}"


def main(argv=None):
    parser, args = parse(argv)
    cases = select(load_cases(), args.case, parser)
    if args.list:
        for case in cases:
            print(f"{case['name']}: {case.get('description', '')}")
        return 0
    config = Config(args.server, args.token, args.second_token, args.operator, args.label)
    results = []
    with requests.Session() as http:
        for case in cases:
            results.append(run_case(case, config, http))
            if not args.json:
                print(line(results[-1]), flush=True)
    counts = {o: sum(r.outcome == o for r in results) for o in ("pass", "fail", "skip")}
    if args.json:
        document = {"cases": [r.as_dict() for r in results], **counts}
        print(json.dumps(document, indent=2))
    else:
        print(
            f"{len(results)} cases: {counts['pass']} passed, {counts['fail']} failed, "
            f"{counts['skip']} skipped"
        )
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())

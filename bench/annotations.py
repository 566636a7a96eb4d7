"""How much of the server apps' public surface carries type annotations.

    .venv/bin/python bench/annotations.py           # one JSON line per app, then the total
    .venv/bin/python bench/annotations.py --missing # also list what is not annotated

Read from the source with `ast` (nothing is imported). A public function is a
`def` or `async def` at module level or in a class body (at any depth of
nested classes) whose name does not start with `_`; functions nested inside
functions are not counted. It is fully annotated when its return and every
parameter are, except the first parameter of a method (self or cls) that is
not a `@staticmethod`. Migrations are not counted.
"""

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = [
    "core",
    "audit",
    "calendars",
    "scheduler",
    "runners",
    "dispatch",
    "notifications",
    "control",
    "dashboard",
    "croniq_project",
]


def public_functions(tree):
    """[(qualified name, node, is_method)] of the public functions in `tree`."""
    found = []

    def walk(body, prefix, in_class):
        for node in body:
            if isinstance(node, ast.ClassDef):
                walk(node.body, f"{prefix}{node.name}.", True)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if not node.name.startswith("_"):
                    found.append((f"{prefix}{node.name}", node, in_class))
            elif isinstance(node, ast.If | ast.Try):
                # Definitions under `if`/`try` at module or class level count too.
                handlers = [h.body for h in getattr(node, "handlers", [])]
                for block in (node.body, node.orelse, *handlers):
                    walk(block, prefix, in_class)

    walk(tree.body, "", False)
    return found


def is_annotated(node, is_method):
    arguments = node.args
    parameters = arguments.posonlyargs + arguments.args
    decorators = {getattr(d, "id", getattr(d, "attr", None)) for d in node.decorator_list}
    if is_method and "staticmethod" not in decorators:
        parameters = parameters[1:]
    parameters = parameters + arguments.kwonlyargs
    parameters += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    return node.returns is not None and all(p.annotation is not None for p in parameters)


def measure(root=ROOT, apps=APPS):
    """{app: {"functions": n, "annotated": n, "missing": [path:line name]}}."""
    figures = {}
    for app in apps:
        counts = {"functions": 0, "annotated": 0, "missing": []}
        for path in sorted((root / app).rglob("*.py")):
            relative = path.relative_to(root)
            if "migrations" in relative.parts:
                continue
            for name, node, is_method in public_functions(ast.parse(path.read_text())):
                counts["functions"] += 1
                if is_annotated(node, is_method):
                    counts["annotated"] += 1
                else:
                    counts["missing"].append(f"{relative}:{node.lineno} {name}")
        figures[app] = counts
    return figures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--missing", action="store_true", help="list unannotated functions")
    options = parser.parse_args(argv)
    figures = measure()
    total = {"functions": 0, "annotated": 0}
    for app, counts in figures.items():
        line = {"bench": "annotations", "name": app}
        line.update(functions=counts["functions"], annotated=counts["annotated"])
        line["percent"] = round(100 * counts["annotated"] / max(counts["functions"], 1), 1)
        if options.missing:
            line["missing"] = counts["missing"]
        print(json.dumps(line))
        total["functions"] += counts["functions"]
        total["annotated"] += counts["annotated"]
    percent = round(100 * total["annotated"] / max(total["functions"], 1), 1)
    print(json.dumps({"bench": "annotations", "name": "total", **total, "percent": percent}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

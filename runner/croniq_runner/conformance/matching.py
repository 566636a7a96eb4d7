"""The pure half of the replayer: placeholders, paths and expectations.

Nothing here touches the network, so the rules a case is judged by can be
tested on their own.
"""

import json
import re

# ${name}, ${name.path.0}, ${name.path+1}: a value captured or given earlier.
PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)([+-][0-9]+)?\}")


class CaseError(Exception):
    """The case itself cannot be carried out (an unknown placeholder, a bad path)."""


def lookup(document, path):
    """The value at a dotted path ("executions.0.id"); "" is the document itself."""
    value = document
    for part in path.split(".") if path else ():
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise CaseError(f"no {path!r} in {brief(document)}")
    return value


def resolve(match, values):
    name, offset = match.group(1), match.group(2)
    root, _, rest = name.partition(".")
    if root not in values:
        raise CaseError(f"unknown placeholder ${{{name}}}")
    value = lookup(values[root], rest)
    if offset:
        if not is_integer(value):
            raise CaseError(f"${{{name}{offset}}}: {brief(value)} is not an integer")
        value = int(value) + int(offset)
    return value


def substitute(template, values):
    """`template` with every placeholder replaced.

    A string that is one placeholder and nothing else takes the value's own
    JSON type (a lease stays an integer); inside longer text it is spliced in
    as text. `{"$repeat": "x", "times": n}` stands for the string repeated.
    """
    if isinstance(template, str):
        whole = PLACEHOLDER.fullmatch(template)
        if whole:
            return resolve(whole, values)
        return PLACEHOLDER.sub(lambda m: as_text(resolve(m, values)), template)
    if isinstance(template, list):
        return [substitute(item, values) for item in template]
    if isinstance(template, dict):
        if "$repeat" in template:
            return as_text(substitute(template["$repeat"], values)) * int(template["times"])
        return {key: substitute(item, values) for key, item in template.items()}
    return template


def as_text(value):
    return value if isinstance(value, str) else json.dumps(value)


def is_integer(value):
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": is_integer,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def shape_errors(value, shape, where="body"):
    """How `value` departs from `shape`; an empty list when it fits.

    A shape is a JSON type name, a list of names (any of them), an object of
    required keys and their shapes (other keys are allowed), or
    `{"$array": shape}` for an array whose every item has that shape.
    """
    if isinstance(shape, str):
        shape = [shape]
    if isinstance(shape, list):
        unknown = [name for name in shape if name not in TYPES]
        if unknown:
            raise CaseError(f"unknown JSON type {unknown[0]!r} in the shape of {where}")
        if any(TYPES[name](value) for name in shape):
            return []
        return [f"{where}: expected {' or '.join(shape)}, got {brief(value)}"]
    if "$array" in shape:
        if not isinstance(value, list):
            return [f"{where}: expected array, got {brief(value)}"]
        errors = []
        for index, item in enumerate(value):
            errors += shape_errors(item, shape["$array"], f"{where}.{index}")
        return errors
    if not isinstance(value, dict):
        return [f"{where}: expected object, got {brief(value)}"]
    errors = []
    for key, inner in shape.items():
        if key not in value:
            errors.append(f"{where}: missing key {key!r}")
        else:
            errors += shape_errors(value[key], inner, f"{where}.{key}")
    return errors


def same(expected, got):
    """JSON equality: 1 and 1.0 are one number, true is not 1."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return expected is got
    if isinstance(expected, int | float) and isinstance(got, int | float):
        return expected == got
    if isinstance(expected, list) and isinstance(got, list):
        return len(expected) == len(got) and all(map(same, expected, got))
    if isinstance(expected, dict) and isinstance(got, dict):
        return expected.keys() == got.keys() and all(same(expected[k], got[k]) for k in expected)
    return type(expected) is type(got) and expected == got


def expectation_errors(expect, status, body, elapsed, values):
    """Everything a step's answer got wrong; an empty list when it passed.

    `body` is the parsed JSON answer, or NOT_JSON when it was none.
    """
    expect = substitute(expect, values)
    wanted = expect.get("status")
    if wanted is not None:
        allowed = wanted if isinstance(wanted, list) else [wanted]
        if status not in allowed:
            return [f"status: expected {' or '.join(map(str, allowed))}, got {status}"]
    checks_body = any(key in expect for key in ("shape", "equals", "contains", "length"))
    if checks_body and body is NOT_JSON:
        return ["body: expected JSON, got something else"]
    errors = []
    if "shape" in expect:
        errors += shape_errors(body, expect["shape"])
    for path, value in expect.get("equals", {}).items():
        errors += compare(body, path, value, "expected", same)
    for path, value in expect.get("contains", {}).items():
        errors += compare(body, path, value, "expected to contain", contains)
    for path, value in expect.get("length", {}).items():
        errors += compare(body, path, value, "expected length", has_length)
    if "min_seconds" in expect and elapsed < expect["min_seconds"]:
        errors.append(f"answered after {elapsed:.2f}s, expected at least {expect['min_seconds']}s")
    if "max_seconds" in expect and elapsed > expect["max_seconds"]:
        errors.append(f"answered after {elapsed:.2f}s, expected at most {expect['max_seconds']}s")
    return errors


def compare(body, path, expected, verb, test):
    where = f"body.{path}" if path else "body"
    try:
        got = lookup(body, path)
    except CaseError:
        return [f"{where}: missing"]
    if test(expected, got):
        return []
    return [f"{where}: {verb} {brief(expected)}, got {brief(got)}"]


def contains(expected, got):
    return isinstance(got, list) and any(same(expected, item) for item in got)


def has_length(expected, got):
    return isinstance(got, list | dict | str) and len(got) == expected


class _NotJson:
    def __repr__(self):
        return "NOT_JSON"


NOT_JSON = _NotJson()


def brief(value, limit=160):
    if value is NOT_JSON:
        return "a body that is not JSON"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."

"""Croniq's import structure (docs/design.md §1), read from the source with `ast`.

Every import counts, also one inside a function: a lazy import still ties
two modules together; so does a relation named by its "app.Model" string, and
a migration's dependency on another app's. The apps depend downward only
(core at the bottom; audit, calendars and the runners' rows; the scheduler;
dispatch and notifications; control, the dashboard and the project); no two
modules import each other, directly or round a circle; the agent needs only
the standard library and requests.
"""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# App -> layer: an app may import its own layer and the layers below it;
# core (shared infrastructure) is below every app.
LAYERS = {
    "core": 0,
    # Projects and the roles held in them: every app names its rows' project.
    "projects": 1,
    "audit": 1,
    "calendars": 1,
    "runners": 1,
    # The secrets store: on the audit trail; the scheduler checks references
    # to it, dispatch resolves them.
    "vault": 1,
    "scheduler": 2,
    "dispatch": 3,
    "notifications": 3,
    # Check-ins stand on the scheduler (cron math) and notifications (the
    # outbox); the management API and the dashboard stand on them.
    "checks": 3,
    "control": 4,
    "dashboard": 4,
    "croniq_project": 4,
}
AGENT_PACKAGE = ROOT / "runner" / "croniq_runner"
# What the agent may import besides the standard library and itself.
AGENT_THIRD_PARTY = {"requests"}


# -- reading imports ---------------------------------------------------------


def module_name(path, root):
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source, name, is_package=False):
    """[(imported name, line)] of every import in `source`, at any depth.

    `from a import b` yields both `a` and `a.b` (b may be a module); relative
    imports are resolved against `name`.
    """
    found = []
    package = name.split(".") if is_package else name.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found.append((module, node.lineno))
            found += [(f"{module}.{alias.name}", node.lineno) for alias in node.names]
    return found


def read_modules(root, packages):
    """{module name: (path, [(imported name, line)])} of the packages under `root`."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            name = module_name(path, root)
            imports = imports_of(path.read_text(), name, path.name == "__init__.py")
            modules[name] = (path, imports)
    return modules


def graph_of(modules):
    """{module: {imported module: line}}, edges between `modules` only.

    Importing `a.b.c` runs `a` and `a.b` first: those are edges too, except
    from inside them (every module of a package runs its package first).
    """
    graph = {}
    for name, (_, imports) in modules.items():
        edges = graph.setdefault(name, {})
        for target, line in imports:
            parts = target.split(".")
            for end in range(1, len(parts) + 1):
                imported = ".".join(parts[:end])
                implied = end < len(parts)
                if implied and name.startswith(f"{imported}."):
                    continue
                if imported in modules and imported != name:
                    edges.setdefault(imported, line)
    return graph


# -- the rules ----------------------------------------------------------------


def app_of(module):
    return module.split(".")[0]


def upward_imports(graph, layers):
    """["a.x imports b.y (line n)"] for every import of a higher app."""
    found = []
    for module, edges in sorted(graph.items()):
        here = layers.get(app_of(module))
        for target, line in sorted(edges.items()):
            there = layers.get(app_of(target))
            if here is not None and there is not None and there > here:
                found.append(f"{module} imports {target} (line {line})")
    return found


def circles(graph):
    """Each import circle, as [a, b, ..., a]: one per group of modules that
    reach each other (Tarjan's strongly connected components, iteratively)."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(group)
    return [circle_in(graph, group) for group in groups]


def circle_in(graph, group):
    """A path round `group` (modules that reach each other), first = last."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node]):
                if target == start:
                    return paths[node] + [start]
                if target in group and target not in paths:
                    paths[target] = paths[node] + [target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"no circle in {group}")


def agent_modules(root=ROOT):
    """The agent's modules: the runner package once it exists, else the
    agent's files in the runners app."""
    if AGENT_PACKAGE.is_dir():
        return read_modules(AGENT_PACKAGE.parent, [AGENT_PACKAGE.name])
    modules = {}
    for path in sorted((root / "runners").glob("agent*.py")):
        name = module_name(path, root)
        modules[name] = (path, imports_of(path.read_text(), name))
    return modules


def agent_violations(modules, allowed=AGENT_THIRD_PARTY):
    """["x imports y (line n)"] for agent imports outside the standard
    library, `allowed` and the agent's own modules."""
    found = []
    for module, (_, imports) in sorted(modules.items()):
        for target, line in imports:
            top = target.split(".")[0]
            if target in modules or top in allowed or top in sys.stdlib_module_names:
                continue
            if any(target.startswith(f"{own}.") for own in modules):
                continue  # a name from one of its own modules
            found.append(f"{module} imports {target} (line {line})")
    return sorted(set(found))


# -- the schema's edges: foreign keys and migration dependencies --------------

RELATIONS = {"ForeignKey", "OneToOneField", "ManyToManyField"}


def schema_edges(source, app, in_migrations):
    """[(other app, what, line)] of the schema edges in `source`, a module of
    `app`: every relation field named by its "app.Model" string (a relation
    to a class is an import, which the import graph reads), and in a
    migration every dependency on another app's migration."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            targets = node.args[:1] + [k.value for k in node.keywords if k.arg == "to"]
            for target in targets if name in RELATIONS else ():
                if isinstance(target, ast.Constant) and "." in str(target.value):
                    found.append((target.value.split(".")[0], target.value, node.lineno))
        elif in_migrations and isinstance(node, ast.Assign):
            if [getattr(t, "id", None) for t in node.targets] != ["dependencies"]:
                continue
            for dependency in getattr(node.value, "elts", ()):
                parts = [getattr(e, "value", None) for e in getattr(dependency, "elts", ())]
                if len(parts) == 2 and all(isinstance(part, str) for part in parts):
                    found.append((parts[0], f"migration {parts[0]}.{parts[1]}", node.lineno))
    return [(other, what, line) for other, what, line in found if other != app]


def upward_schema_edges(root, layers):
    """["file: what (line n)"] for every schema edge to a higher app."""
    found = []
    for app, here in sorted(layers.items()):
        for path in sorted((root / app).rglob("*.py")) if (root / app).is_dir() else ():
            in_migrations = "migrations" in path.relative_to(root).parts
            for other, what, line in schema_edges(path.read_text(), app, in_migrations):
                if layers.get(other, -1) > here:
                    found.append(f"{path.relative_to(root)}: {what} (line {line})")
    return found


def server_graph():
    return graph_of(read_modules(ROOT, [app for app in LAYERS if (ROOT / app).is_dir()]))


# -- the checks on Croniq ------------------------------------------------------


def test_no_app_imports_a_higher_one():
    assert upward_imports(server_graph(), LAYERS) == []


def test_the_scheduler_imports_nothing_from_dispatch_notifications_or_the_dashboard():
    above = {"dispatch", "notifications", "checks", "control", "dashboard", "croniq_project"}
    graph = server_graph()
    scheduler = [m for m in graph if app_of(m) == "scheduler"]
    assert len(scheduler) > 5  # the walk found the app
    assert [f"{m} imports {t}" for m in scheduler for t in graph[m] if app_of(t) in above] == []


def test_no_foreign_key_or_migration_dependency_runs_up():
    assert upward_schema_edges(ROOT, LAYERS) == []


def test_no_import_circle_between_modules():
    assert circles(server_graph()) == []


# The runner package's optional extras: each module and what it may import
# besides (`croniq mcp`'s server, imported only when the command runs).
AGENT_EXTRAS = {"croniq_runner.mcp_server": {"mcp", "pydantic"}}


def test_the_agent_needs_only_the_standard_library_and_requests():
    modules = agent_modules()
    assert modules, "the agent's modules were not found"
    extras = {name: modules.pop(name) for name in AGENT_EXTRAS if name in modules}
    assert agent_violations(modules) == []
    for name, module in extras.items():
        allowed = AGENT_THIRD_PARTY | AGENT_EXTRAS[name]
        assert agent_violations(modules | {name: module}, allowed) == []


# -- the checks themselves, on planted graphs --------------------------------


def test_a_planted_circle_is_reported_with_its_path():
    graph = {
        "dispatch.leases": {"dispatch.hub": 3},
        "dispatch.hub": {"dispatch.identity": 5, "scheduler.models": 6},
        "dispatch.identity": {"dispatch.leases": 9},
        "scheduler.models": {},
    }
    assert circles(graph) == [
        ["dispatch.hub", "dispatch.identity", "dispatch.leases", "dispatch.hub"]
    ]
    del graph["dispatch.identity"]["dispatch.leases"]
    assert circles(graph) == []


def test_a_planted_upward_import_is_reported():
    graph = {
        "scheduler.ticks": {"dispatch.hub": 371, "audit": 18},
        "calendars.admin": {"scheduler.models": 82},
        "dispatch.hub": {"scheduler.models": 1},
        "scheduler.models": {"calendars.rules": 7},
        "audit": {},
        "calendars.rules": {},
    }
    assert upward_imports(graph, LAYERS) == [
        "calendars.admin imports scheduler.models (line 82)",
        "scheduler.ticks imports dispatch.hub (line 371)",
    ]


def test_imports_inside_functions_and_relative_ones_are_read(tmp_path):
    for path, text in {
        "scheduler/__init__.py": "",
        "scheduler/ticks.py": "def notify():\n    from dispatch.hub import notify_new_work\n",
        "scheduler/loop.py": "from . import ticks\n",
        "dispatch/__init__.py": "",
        "dispatch/hub.py": "import scheduler.loop\n",
    }.items():
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_text(text)

    graph = graph_of(read_modules(tmp_path, ["scheduler", "dispatch"]))

    assert graph["scheduler.ticks"] == {"dispatch": 2, "dispatch.hub": 2}
    assert graph["scheduler.loop"] == {"scheduler": 1, "scheduler.ticks": 1}
    assert upward_imports(graph, LAYERS) == [
        "scheduler.ticks imports dispatch (line 2)",
        "scheduler.ticks imports dispatch.hub (line 2)",
    ]
    assert circles(graph) == [["dispatch.hub", "scheduler.loop", "scheduler.ticks", "dispatch.hub"]]


def test_planted_schema_edges_running_up_are_reported(tmp_path):
    for path, text in {
        "calendars/models.py": (
            "from django.db import models\n"
            "class Calendar(models.Model):\n"
            "    job = models.ForeignKey('scheduler.Job', on_delete=models.CASCADE)\n"
            "    base = models.ForeignKey(to='calendars.Calendar', on_delete=models.CASCADE)\n"
        ),
        "calendars/migrations/0002_x.py": (
            "class Migration:\n"
            "    dependencies = [('calendars', '0001_initial'), ('notifications', '0004_y')]\n"
        ),
        "notifications/models.py": ("rule = models.ManyToManyField('calendars.Calendar')\n"),
    }.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)

    assert upward_schema_edges(tmp_path, LAYERS) == [
        "calendars/migrations/0002_x.py: migration notifications.0004_y (line 2)",
        "calendars/models.py: scheduler.Job (line 3)",
    ]


def test_an_agent_importing_django_or_a_server_app_is_reported(tmp_path):
    (tmp_path / "croniq_runner").mkdir()
    for name, text in {
        "__init__.py": "",
        "agent.py": "import json\nimport requests\nfrom croniq_runner.http import Client\n",
        "http.py": (
            "def lazy():\n    from django.conf import settings\n    import scheduler.models\n"
        ),
    }.items():
        (tmp_path / "croniq_runner" / name).write_text(text)

    modules = read_modules(tmp_path, ["croniq_runner"])

    assert agent_violations(modules) == [
        "croniq_runner.http imports django.conf (line 2)",
        "croniq_runner.http imports django.conf.settings (line 2)",
        "croniq_runner.http imports scheduler.models (line 3)",
    ]

"""The YAML `croniq-admin export` writes reads back as what was written,
through the loader apply uses, whatever the text: no anchors or aliases
(apply refuses them), line breaks YAML knows besides "\\n" kept, text
YAML would read as another type quoted. With libyaml's emitter where
PyYAML has it, else PyYAML's own: both must do."""

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.apply.document import parse
from scheduler.apply.export import Dumper, dumped, dumper_on

# Any text a database stores: no NUL, no lone surrogate.
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=12)
DUMPERS = pytest.mark.parametrize(
    "dumper", [Dumper, dumper_on(yaml.SafeDumper)], ids=["installed", "pure-python"]
)


@DUMPERS
@given(texts=st.lists(TEXT, max_size=6))
@settings(max_examples=200, deadline=None)
def test_any_text_reads_back_the_same(dumper, texts):
    document = {
        "jobs": [{"name": "x", "command": t, "labels": texts, "env": {t: t}} for t in texts]
    }

    assert parse(dumped(document, dumper), "YAML") == document


@DUMPERS
def test_line_breaks_other_than_newline_are_kept(dumper):
    texts = ["a\x85b", "a\u2028b", "a\u2029b", "\ufeffa", "a\u2028b\nc"]
    document = {"jobs": [{"name": "x", "command": t, "env": {t: t}} for t in texts]}

    assert parse(dumped(document, dumper), "YAML") == document


@DUMPERS
def test_an_object_met_twice_is_written_out_twice_not_aliased(dumper):
    shared = ["mon", "tue"]
    document = {"calendars": [{"name": "a", "weekdays": shared}, {"name": "b", "weekdays": shared}]}

    text = dumped(document, dumper)

    assert "&" not in text and "*" not in text
    assert parse(text, "YAML") == document

"""The YAML `croniq-admin export` writes reads back as what was written,
through the loader apply uses, whatever the text: no anchors or aliases
(apply refuses them), line breaks YAML knows besides "\\n" kept, text
YAML would read as another type quoted."""

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.apply.document import parse
from scheduler.apply.export import dumped

# Any text a database stores: no NUL, no lone surrogate.
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=12)


@given(st.lists(TEXT, max_size=6))
@settings(max_examples=300, deadline=None)
def test_any_text_reads_back_the_same(texts):
    document = {
        "jobs": [{"name": "x", "command": t, "labels": texts, "env": {t: t}} for t in texts]
    }

    assert parse(dumped(document), "YAML") == document


def test_an_object_met_twice_is_written_out_twice_not_aliased():
    shared = ["mon", "tue"]
    document = {"calendars": [{"name": "a", "weekdays": shared}, {"name": "b", "weekdays": shared}]}

    text = dumped(document)

    assert "&" not in text and "*" not in text
    assert parse(text, "YAML") == document

import pytest

from notifications import secrets


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${CRONIQ_HOOK_SECRET}", True),
        ("${_X1}", True),
        ("file:/run/secrets/hook", True),
        ("file:relative", True),  # a reference, refused when resolved: see below
        ("hunter2", False),
        ("${1BAD}", False),
        ("${A}${B}", False),
        ("Bearer ${TOKEN}", False),
        ("", False),
        (None, False),
    ],
)
def test_it_tells_a_reference_from_a_literal(text, expected):
    assert secrets.is_reference(text) is expected


def test_it_resolves_an_environment_variable(monkeypatch):
    monkeypatch.setenv("CRONIQ_HOOK_SECRET", "s3cr3t-value")
    assert secrets.resolve("${CRONIQ_HOOK_SECRET}") == "s3cr3t-value"


def test_an_unset_variable_is_named(monkeypatch):
    monkeypatch.delenv("CRONIQ_HOOK_SECRET", raising=False)
    with pytest.raises(
        ValueError, match=r"^\$\{CRONIQ_HOOK_SECRET\} is not set in the environment$"
    ):
        secrets.validate_reference("${CRONIQ_HOOK_SECRET}")


def test_an_empty_variable_is_refused(monkeypatch):
    monkeypatch.setenv("CRONIQ_HOOK_SECRET", "  ")
    with pytest.raises(ValueError, match="is set but empty"):
        secrets.resolve("${CRONIQ_HOOK_SECRET}")


def test_a_literal_secret_is_refused_without_being_echoed():
    with pytest.raises(ValueError) as refused:
        secrets.resolve("hunter2")
    assert str(refused.value) == secrets.NOT_A_REFERENCE
    assert "hunter2" not in str(refused.value)


def test_it_reads_a_file_and_strips_it(tmp_path):
    path = tmp_path / "hook"
    path.write_text("from-a-file\n")
    assert secrets.resolve(f"file:{path}") == "from-a-file"


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"file:.*/absent: cannot read it: No such file"):
        secrets.resolve(f"file:{tmp_path / 'absent'}")


def test_a_relative_file_is_refused():
    with pytest.raises(ValueError, match="must be absolute"):
        secrets.resolve("file:run/secrets/hook")


def test_an_empty_file_is_refused(tmp_path):
    (tmp_path / "hook").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        secrets.resolve(f"file:{tmp_path / 'hook'}")


def test_expand_replaces_every_reference_inside_a_text(monkeypatch):
    monkeypatch.setenv("HOOK_HOST", "hooks.example.com")
    monkeypatch.setenv("HOOK_TOKEN", "T0K3N")
    url = "https://${HOOK_HOST}/services/${HOOK_TOKEN}?again=${HOOK_TOKEN}"
    assert secrets.expand(url) == "https://hooks.example.com/services/T0K3N?again=T0K3N"
    assert secrets.expand("Bearer ${HOOK_TOKEN}") == "Bearer T0K3N"
    assert secrets.expand("no references") == "no references"
    assert secrets.names_in(url) == ["HOOK_HOST", "HOOK_TOKEN", "HOOK_TOKEN"]


def test_expand_names_the_unset_variable(monkeypatch):
    monkeypatch.setenv("HOOK_HOST", "hooks.example.com")
    monkeypatch.delenv("HOOK_TOKEN", raising=False)
    with pytest.raises(ValueError, match=r"^\$\{HOOK_TOKEN\} is not set in the environment$"):
        secrets.expand("https://${HOOK_HOST}/services/${HOOK_TOKEN}")


def test_expand_reads_a_whole_file_reference(tmp_path):
    (tmp_path / "slack-url").write_text("https://hooks.slack.com/services/T/B/X\n")
    expanded = secrets.expand(f"file:{tmp_path / 'slack-url'}")
    assert expanded == "https://hooks.slack.com/services/T/B/X"

import pytest

from notifications import secrets


@pytest.fixture
def secrets_dir(tmp_path, settings):
    """CRONIQ_SECRETS_DIR, a fresh directory."""
    settings.CRONIQ_SECRETS_DIR = str(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${CRONIQ_SECRET_HOOK}", True),
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
    monkeypatch.setenv("CRONIQ_SECRET_HOOK", "s3cr3t-value")
    assert secrets.resolve("${CRONIQ_SECRET_HOOK}") == "s3cr3t-value"


def test_an_unset_variable_is_named(monkeypatch):
    monkeypatch.delenv("CRONIQ_SECRET_HOOK", raising=False)
    with pytest.raises(
        ValueError, match=r"^\$\{CRONIQ_SECRET_HOOK\} is not set in the environment$"
    ):
        secrets.validate_reference("${CRONIQ_SECRET_HOOK}")


def test_an_empty_variable_is_refused(monkeypatch):
    monkeypatch.setenv("CRONIQ_SECRET_HOOK", "  ")
    with pytest.raises(ValueError, match="is set but empty"):
        secrets.resolve("${CRONIQ_SECRET_HOOK}")


def test_a_literal_secret_is_refused_without_being_echoed():
    with pytest.raises(ValueError) as refused:
        secrets.resolve("hunter2")
    assert str(refused.value) == secrets.NOT_A_REFERENCE
    assert "hunter2" not in str(refused.value)


def test_it_reads_a_file_and_strips_it(secrets_dir):
    path = secrets_dir / "hook"
    path.write_text("from-a-file\n")
    assert secrets.resolve(f"file:{path}") == "from-a-file"


def test_a_missing_file_is_named(secrets_dir):
    with pytest.raises(ValueError, match=r"file:.*/absent: cannot read it: No such file"):
        secrets.resolve(f"file:{secrets_dir / 'absent'}")


def test_a_relative_file_is_refused():
    with pytest.raises(ValueError, match="must be absolute"):
        secrets.resolve("file:run/secrets/hook")


def test_an_empty_file_is_refused(secrets_dir):
    (secrets_dir / "hook").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        secrets.resolve(f"file:{secrets_dir / 'hook'}")


def test_expand_replaces_every_reference_inside_a_text(monkeypatch):
    monkeypatch.setenv("CRONIQ_SECRET_HOOK_HOST", "hooks.example.com")
    monkeypatch.setenv("CRONIQ_SECRET_HOOK_TOKEN", "T0K3N")
    url = "https://${CRONIQ_SECRET_HOOK_HOST}/services/${CRONIQ_SECRET_HOOK_TOKEN}?again=${CRONIQ_SECRET_HOOK_TOKEN}"
    assert secrets.expand(url) == "https://hooks.example.com/services/T0K3N?again=T0K3N"
    assert secrets.expand("Bearer ${CRONIQ_SECRET_HOOK_TOKEN}") == "Bearer T0K3N"
    assert secrets.expand("no references") == "no references"
    assert secrets.names_in(url) == [
        "CRONIQ_SECRET_HOOK_HOST",
        "CRONIQ_SECRET_HOOK_TOKEN",
        "CRONIQ_SECRET_HOOK_TOKEN",
    ]


def test_expand_names_the_unset_variable(monkeypatch):
    monkeypatch.setenv("CRONIQ_SECRET_HOOK_HOST", "hooks.example.com")
    monkeypatch.delenv("CRONIQ_SECRET_HOOK_TOKEN", raising=False)
    with pytest.raises(
        ValueError, match=r"^\$\{CRONIQ_SECRET_HOOK_TOKEN\} is not set in the environment$"
    ):
        secrets.expand("https://${CRONIQ_SECRET_HOOK_HOST}/services/${CRONIQ_SECRET_HOOK_TOKEN}")


def test_expand_reads_a_whole_file_reference(secrets_dir):
    (secrets_dir / "slack-url").write_text("https://hooks.slack.com/services/T/B/X\n")
    expanded = secrets.expand(f"file:{secrets_dir / 'slack-url'}")
    assert expanded == "https://hooks.slack.com/services/T/B/X"


# -- what a channel may read -----------------------------------------------------


@pytest.mark.parametrize("name", ["SECRET_KEY", "DATABASE_URL", "CRONIQ_HOOK_SECRET", "PATH"])
def test_only_croniq_secret_variables_are_read(monkeypatch, name):
    # Whoever writes a channel chooses where it sends what it reads.
    monkeypatch.setenv(name, "server-only-value")
    monkeypatch.setenv("CRONIQ_SECRET_OK", "fine")
    for read in (secrets.resolve, secrets.expand):
        with pytest.raises(ValueError, match=rf"^\$\{{{name}\}}: a channel reads only") as refused:
            read(f"${{{name}}}")
        assert "server-only-value" not in str(refused.value)
        assert "CRONIQ_SECRET_*" in str(refused.value)
    with pytest.raises(ValueError, match=rf"\$\{{{name}\}}: a channel reads only"):
        secrets.expand(f"Bearer ${{CRONIQ_SECRET_OK}} ${{{name}}}")


def test_a_croniq_secret_variable_inside_a_text_is_read(monkeypatch):
    monkeypatch.setenv("CRONIQ_SECRET_HOOK_TOKEN", "T0K3N")
    assert secrets.expand("Bearer ${CRONIQ_SECRET_HOOK_TOKEN}") == "Bearer T0K3N"


def test_a_file_outside_the_secrets_dir_is_refused(secrets_dir, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "key"
    outside.write_text("not for channels")
    with pytest.raises(ValueError, match=r"a channel reads only files under .* symlinks resolved"):
        secrets.resolve(f"file:{outside}")


@pytest.mark.parametrize(
    "path", ["/proc/self/environ", "/etc/hostname", "/run/secrets/../../etc/hostname"]
)
def test_proc_and_other_system_files_are_refused_with_the_default_dir(path):
    with pytest.raises(ValueError, match=r"a channel reads only files under /run/secrets"):
        secrets.resolve(f"file:{path}")


def test_proc_is_refused_even_when_the_secrets_dir_is_set_to_it(settings):
    settings.CRONIQ_SECRETS_DIR = "/proc/self"
    with pytest.raises(ValueError, match="a channel reads only files under"):
        secrets.resolve("file:/proc/self/environ")


def test_dot_dot_and_symlinks_do_not_leave_the_secrets_dir(secrets_dir, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "key"
    outside.write_text("not for channels")
    (secrets_dir / "link").symlink_to(outside)
    (secrets_dir / "sub").mkdir()
    (secrets_dir / "sub" / "up").symlink_to(secrets_dir.parent)
    escapes = [
        f"file:{secrets_dir}/link",
        f"file:{secrets_dir}/../{outside.parent.name}/key",
        f"file:{secrets_dir}/sub/up/{outside.parent.name}/key",
        f"file:{secrets_dir}",  # the directory itself is no secret
    ]
    for reference in escapes:
        with pytest.raises(ValueError, match="a channel reads only files under"):
            secrets.resolve(reference)


def test_a_symlink_inside_the_secrets_dir_is_followed(secrets_dir):
    # Kubernetes mounts secrets as links into a hidden directory beside them.
    (secrets_dir / "..data").mkdir()
    (secrets_dir / "..data" / "hook").write_text("mounted\n")
    (secrets_dir / "hook").symlink_to(secrets_dir / "..data" / "hook")
    assert secrets.resolve(f"file:{secrets_dir}/hook") == "mounted"


def test_forbidden_names_the_limit_without_reading_anything(secrets_dir, monkeypatch):
    monkeypatch.delenv("CRONIQ_SECRET_ABSENT", raising=False)
    assert secrets.forbidden("https://h.example/${CRONIQ_SECRET_ABSENT}") is None
    assert secrets.forbidden(f"file:{secrets_dir}/absent") is None
    assert "a channel reads only" in secrets.forbidden("Bearer ${SECRET_KEY}")
    assert "a channel reads only" in secrets.forbidden("file:/proc/self/environ")

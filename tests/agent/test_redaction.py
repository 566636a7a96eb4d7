"""A run's secret values (`redact` in its assignment) are masked as `***` in
the output the agent sends, however the pipe cuts that output into reads;
without `redact` the output goes out as before, byte for byte and at once."""

import logging
import threading
import time

from hypothesis import given
from hypothesis import strategies as st

from croniq_runner.agent import Agent
from croniq_runner.config import Config
from croniq_runner.job import Job
from croniq_runner.logs import LogBatcher
from croniq_runner.redaction import Redactor, redactor_for
from croniq_runner.timing import Backoff, LeaseBook
from tests.agent.test_job import RecordingServer, run_job


def fed(redactor, *reads):
    """What the redactor hands on for `reads`, then for the end of the run."""
    return b"".join(redactor.feed(read) for read in reads) + redactor.finish()


def output(server):
    return "".join(body["data"] for body in server.bodies("logs"))


# -- the Redactor ----------------------------------------------------------------


def test_every_occurrence_of_a_value_is_masked():
    redactor = Redactor(["hunter22"])
    assert fed(redactor, b"pw=hunter22; again hunter22\n") == b"pw=***; again ***\n"


def test_a_value_cut_between_two_reads_is_masked():
    redactor = Redactor(["hunter22"])
    assert redactor.feed(b"pw=hun") == b"pw="  # only the possible start is held
    assert redactor.feed(b"ter22!\n") == b"***!\n"
    assert redactor.finish() == b""


def test_a_held_start_that_is_not_the_value_goes_out_with_the_next_read():
    redactor = Redactor(["hunter22"])
    assert redactor.feed(b"a hun") == b"a "
    assert redactor.feed(b"dred") == b"hundred"


def test_the_held_tail_is_flushed_at_the_end_of_the_run():
    redactor = Redactor(["hunter22"])
    assert redactor.feed(b"last word: hunte") == b"last word: "
    assert redactor.finish() == b"hunte"


def test_values_shorter_than_four_characters_are_left_alone():
    redactor = Redactor(["abc", "ééé"])  # three characters, six bytes
    assert not redactor
    assert fed(redactor, b"abc ", "ééé\n".encode()) == "abc ééé\n".encode()
    assert redactor_for({"id": 1, "redact": ["abc", "x"]}) is None


def test_a_short_value_beside_a_long_one_is_still_left_alone():
    redactor = Redactor(["abc", "s3cr3t"])
    assert fed(redactor, b"abc s3cr3t abc") == b"abc *** abc"


def test_the_longest_value_wins_where_two_overlap():
    redactor = Redactor(["abcd", "abcdefgh"])
    assert fed(redactor, b"<abcdefgh> <abcd>") == b"<***> <***>"
    # Overlapping occurrences of different values become one mask: no
    # part of either is left showing.
    assert fed(Redactor(["abcd", "cdefgh"]), b"<abcdefgh>") == b"<***>"
    assert fed(Redactor(["aaaa"]), b"<aaaaaa>") == b"<***>"


def test_occurrences_that_only_touch_are_masked_one_by_one():
    assert fed(Redactor(["abcd"]), b"abcdabcd") == b"******"


def test_a_mask_running_across_reads_is_written_once():
    redactor = Redactor(["aaaa"])
    assert fed(redactor, *[b"a"] * 9, b"!") == b"***!"


def test_a_value_is_matched_in_its_utf8_encoding_even_cut_inside_a_character():
    redactor = Redactor(["pässwörd"])
    data = "login pässwörd ok\n".encode()
    cut = data.index("ä".encode()) + 1  # between the two bytes of ä
    assert fed(redactor, data[:cut], data[cut:]) == b"login *** ok\n"


def test_bytes_around_a_value_are_kept_exactly_invalid_utf8_included():
    redactor = Redactor(["hunter22"])
    assert fed(redactor, b"\xff\xfe", b"hunter22\x00\xc3") == b"\xff\xfe***\x00\xc3"


def test_without_values_the_output_is_handed_on_at_once():
    redactor = Redactor([])
    assert redactor.feed(b"hunt") == b"hunt"
    assert redactor_for({"id": 1}) is None
    assert redactor_for({"id": 1, "redact": []}) is None


def test_a_malformed_redact_field_is_reported_not_fatal(caplog):
    with caplog.at_level(logging.WARNING, logger="croniq.runner"):
        assert redactor_for({"id": 5, "redact": "hunter22"}) is None
        redactor = redactor_for({"id": 5, "redact": ["hunter22", 7, None]})
    assert redactor is not None and fed(redactor, b"hunter22") == b"***"
    assert "execution 5: ignoring `redact`: a list of strings was expected, got str" in caplog.text
    assert "execution 5: ignoring 2 `redact` item(s) that are not strings" in caplog.text


# Values never hold `*`: a value such as "a***" could be made by masking
# ("aabcd" with "abcd" listed), which no redaction can prevent.
value_text = st.text(alphabet="abcé\n", min_size=1, max_size=7)
filler = st.sampled_from([b"a", b"b", b"c", b"\n", b"\xc3", b"\xa9", b"\xff", b"*"])


def masked(values, data):
    """The oracle: every byte of an occurrence of a value of 4 characters or
    more found by brute force, overlapping occurrences masked as one."""
    spans = sorted(
        (start, start + len(pattern))
        for pattern in {value.encode() for value in values if len(value) >= 4}
        for start in range(len(data))
        if data.startswith(pattern, start)
    )
    merged = []
    for start, end in spans:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, shown_from = b"", 0
    for start, end in merged:
        out += data[shown_from:start] + b"***"
        shown_from = end
    return out + data[shown_from:]


def cut(data, cuts):
    """`data` as the reads that end at `cuts`."""
    bounds = [0, *cuts, len(data)]
    return [data[start:end] for start, end in zip(bounds, bounds[1:], strict=False)]


@st.composite
def outputs(draw):
    """(values, output, read boundaries): output mixing the values' UTF-8
    bytes with bytes near them, so they overlap, repeat and come cut."""
    values = draw(st.lists(value_text, min_size=1, max_size=4))
    pieces = st.one_of(filler, st.sampled_from([value.encode() for value in values]))
    data = b"".join(draw(st.lists(pieces, max_size=40)))
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=10)))
    return values, data, cuts


@given(outputs())
def test_output_cut_anywhere_is_redacted_as_the_whole_and_no_value_survives(case):
    values, data, cuts = case
    whole = fed(Redactor(values), data)
    assert whole == masked(values, data)
    assert fed(Redactor(values), *cut(data, cuts)) == whole
    for value in values:
        if len(value) >= 4:
            assert value.encode() not in whole


@given(outputs())
def test_with_only_short_values_each_read_goes_on_unchanged_at_once(case):
    values, data, cuts = case
    redactor = Redactor([value[:3] for value in values])
    for read in cut(data, cuts):
        assert redactor.feed(read) == read
    assert redactor.finish() == b""


def test_the_masked_bytes_decode_as_the_log_batcher_sends_them():
    redactor, batcher = Redactor(["pässwörd"]), LogBatcher()
    data = "é pässwörd é\n".encode()
    for start in range(len(data)):  # one byte per read
        batcher.feed(redactor.feed(data[start : start + 1]))
    batcher.feed(redactor.finish())
    batcher.finish()
    assert batcher.take(force=True) == "é *** é\n"


# -- a run on the agent ------------------------------------------------------------


def test_a_job_echoing_its_secret_sends_the_mask(tmp_path):
    server = RecordingServer()
    run_job(
        'echo "token: $API_TOKEN"',
        server,
        tmp_path,
        env={"API_TOKEN": "tok-1234"},
        redact=["tok-1234", "another-secret"],
    )
    assert output(server) == "token: ***\n"
    [finish] = server.bodies("finish")
    assert finish["exit_code"] == 0


def test_a_secret_the_job_writes_in_two_reads_is_masked(tmp_path):
    server = RecordingServer()
    release = tmp_path / "release"
    done = threading.Event()
    job = Job(
        {
            "id": 9,
            "lease": 4,
            "command": f"printf 'sec'; while [ ! -e {release} ]; do sleep 0.05; done; "
            "printf 'ret-value\\n'",
            "redact": ["secret-value"],
        },
        client=server,
        session="s1",
        work_dir=str(tmp_path),
        on_done=lambda job: done.set(),
        on_unauthorized=lambda error: None,
        giving_up=threading.Event(),
    )
    job.start()
    try:
        # The first read is in and held back: it could begin the secret.
        wait_for(lambda: job._redactor._held == b"sec")
    finally:
        release.touch()
    assert done.wait(10)
    assert output(server) == "***\n"


def test_output_held_as_a_possible_secret_is_sent_when_the_run_ends(tmp_path):
    server = RecordingServer()
    release = tmp_path / "release"
    command = f"printf 'progress: sec'; while [ ! -e {release} ]; do sleep 0.05; done"
    done = threading.Thread(
        target=run_job, args=(command, server, tmp_path), kwargs={"redact": ["secret"]}
    )
    done.start()
    try:
        wait_for(lambda: output(server) == "progress: ")  # "sec" could begin the secret
    finally:
        release.touch()
        done.join(10)
    assert output(server) == "progress: sec"


def test_without_redact_output_is_sent_while_the_job_still_runs(tmp_path):
    server = RecordingServer()
    release = tmp_path / "release"
    command = f"printf 'progress: sec'; while [ ! -e {release} ]; do sleep 0.05; done"
    done = threading.Thread(target=run_job, args=(command, server, tmp_path))
    done.start()
    try:
        wait_for(lambda: output(server) == "progress: sec")
    finally:
        release.touch()
        done.join(10)
    assert output(server) == "progress: sec"


def test_invalid_utf8_without_redact_is_sent_as_before(tmp_path):
    server = RecordingServer()
    run_job(r"printf 'a\377b\n'", server, tmp_path)
    assert output(server) == "a\ufffdb\n"


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


class PollingServer(RecordingServer):
    """Answers the agent's poll with `assignments`, then records the run."""

    def __init__(self, assignments):
        super().__init__()
        self.assignments = assignments

    def post(self, path, body, timeout):
        if path.endswith("/poll"):
            self.calls.append(("poll", dict(body)))
            return {"executions": self.assignments}
        return super().post(path, body, timeout)


def test_the_agent_takes_redact_from_the_poll_answer_and_masks_the_run(tmp_path):
    assignment = {
        "id": 31,
        "lease": 2,
        "job": "deploy",
        "command": 'echo "using $DB_PASSWORD"',
        "env": {"DB_PASSWORD": "correct horse"},
        "attempt": 1,
        "trigger": "manual",
        "redact": ["correct horse"],
    }
    server = PollingServer([assignment])
    agent = Agent(Config(server="http://croniq.test", token="t", name="n", work_dir=str(tmp_path)))
    agent.client = server
    agent.leases = LeaseBook(30.0, clock=time.monotonic)

    agent.poll_once(Backoff())

    assert agent.wait_for_jobs(time.monotonic() + 10)
    assert output(server) == "using ***\n"
    [finish] = server.bodies("finish")
    assert finish["exit_code"] == 0


def test_an_assignment_refused_for_a_missing_field_keeps_its_values_out_of_the_log(caplog):
    agent = Agent(Config(server="http://croniq.test", token="t", name="n"))
    with caplog.at_level(logging.ERROR, logger="croniq.runner"):
        agent.accept({"id": 3, "env": {"K": "hunter22"}, "redact": ["hunter22"]}, 0.0)
    assert "ignoring an assignment without lease, command (it has env, id, redact)" in caplog.text
    assert "hunter22" not in caplog.text

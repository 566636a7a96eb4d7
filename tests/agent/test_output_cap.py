"""A run's output within its max_output (output_cap.py, docs/design.md §15):
all of it while it fits; past it the head and the tail, with a line between
them saying how many bytes were cut, the whole within the limit as the
server counts it (UTF-8 bytes), however the output is cut into reads."""

from hypothesis import given
from hypothesis import strategies as st

from croniq_runner.logs import LogBatcher
from croniq_runner.output_cap import MARKER_ROOM, OutputCap


def capped(limit, *reads):
    """(what goes out as the reads come, what goes out at the end)."""
    cap = OutputCap(limit)
    now = "".join(cap.take(read) for read in reads)
    return now, cap.finish(), cap


def test_output_within_the_limit_goes_out_whole_and_uncut():
    now, end, cap = capped(1024, "a" * 400, "b" * 400, "c" * 224)
    assert now + end == "a" * 400 + "b" * 400 + "c" * 224
    assert not cap.exceeded and cap.cut == 0
    # The head goes out as it comes; the rest waits to see whether it fits.
    assert now == "a" * 400 + "b" * ((1024 - MARKER_ROOM) // 2 - 400)


def test_output_past_the_limit_keeps_head_and_tail_and_says_how_much_was_cut():
    now, end, cap = capped(1024, "h" * 2000, "m" * 5000, "t" * 2000)
    assert cap.exceeded
    log = now + end
    assert len(log.encode()) <= 1024
    head, rest = log.split("\n[croniq-runner: ", 1)
    line, tail = rest.split("]\n", 1)
    assert head == "h" * 448  # (1024 - 128) / 2
    assert tail == "t" * 448
    assert line == f"{9000 - 448 - 448} bytes of output cut here (max_output 1 KiB)"


def test_a_character_is_never_split_and_the_bytes_are_counted_as_utf8():
    now, end, cap = capped(1024, "é" * 1000)  # 2,000 bytes
    log = now + end
    assert len(log.encode()) <= 1024
    head, rest = log.split("\n[croniq-runner: ", 1)
    line, tail = rest.split("]\n", 1)
    assert set(head) == set(tail) == {"é"}
    assert int(line.split()[0]) + len(head.encode()) + len(tail.encode()) == 2000


def test_the_last_output_is_remembered_whatever_the_log_keeps():
    _, _, cap = capped(1024, "x" * 10_000, "Traceback ...\nMemoryError\n")
    assert cap.recent.endswith("MemoryError\n")


chunks = st.lists(st.text(alphabet="ab\né€\U0001f600", max_size=700), max_size=30)


@given(chunks, st.integers(min_value=1024, max_value=4096))
def test_whatever_the_reads_the_log_is_the_output_or_its_head_and_tail(reads, limit):
    now, end, cap = capped(limit, *reads)
    log, output = now + end, "".join(reads)
    size = len(output.encode())
    if size <= limit:
        assert log == output
        return
    assert len(log.encode()) <= limit
    head, rest = log.split("\n[croniq-runner: ", 1)
    line, tail = rest.split("]\n", 1)
    assert output.startswith(head) and output.endswith(tail)
    assert int(line.split()[0]) == size - len(head.encode()) - len(tail.encode())
    # Little is cut that could have been kept: at most a character at each end.
    assert len(head.encode()) + len(tail.encode()) > limit - MARKER_ROOM - 8


def test_the_log_batcher_sends_what_the_cap_keeps():
    batcher = LogBatcher(cap=OutputCap(1024), clock=lambda: 0.0)
    batcher.feed(b"h" * 3000)
    batcher.feed(b"t" * 3000)
    batcher.finish()
    sent = []
    while (batch := batcher.take(force=True)) is not None:
        sent.append(batch)
    log = "".join(sent)
    assert len(log.encode()) <= 1024
    assert log.startswith("h" * 448) and log.endswith("t" * 448)
    assert "5104 bytes of output cut here" in log


def test_the_log_batcher_counts_a_nul_as_the_server_stores_it():
    batcher = LogBatcher(cap=OutputCap(1024), clock=lambda: 0.0)
    batcher.feed(b"\x00" * 1000)  # each stored as U+FFFD, 3 bytes
    batcher.finish()
    log = batcher.take(force=True) + (batcher.take(force=True) or "")
    assert "\x00" not in log
    assert len(log.encode()) <= 1024

from croniq_runner.logs import LogBatcher, split_utf8


class FakeClock:
    def __init__(self, now=0.0):
        self.now = now

    def __call__(self):
        return self.now


def drain(batcher, force=False):
    batches = []
    while (batch := batcher.take(force=force)) is not None:
        batches.append(batch)
    return batches


def test_output_waits_until_it_is_a_second_old():
    clock = FakeClock()
    batcher = LogBatcher(max_bytes=100, max_age=1.0, clock=clock)
    batcher.add("hello\n")
    assert batcher.take() is None
    assert batcher.seconds_until_ready() == 1.0
    clock.now = 0.6
    batcher.add("world\n")
    assert batcher.take() is None
    clock.now = 1.0
    assert batcher.seconds_until_ready() == 0
    assert batcher.take() == "hello\nworld\n"
    assert batcher.take() is None
    assert batcher.seconds_until_ready() is None


def test_a_full_batch_is_ready_at_once_and_no_batch_exceeds_the_size():
    clock = FakeClock()
    batcher = LogBatcher(max_bytes=10, max_age=1.0, clock=clock)
    batcher.add("abcdefghijklmnopqrstuvwxy")
    assert drain(batcher) == ["abcdefghij", "klmnopqrst"]
    assert batcher.take() is None
    assert batcher.take(force=True) == "uvwxy"


def test_size_counts_utf8_bytes_and_never_splits_a_character():
    batcher = LogBatcher(max_bytes=10, max_age=1.0, clock=FakeClock())
    text = "äöü€漢字xyz" * 3
    batcher.add(text)
    batches = drain(batcher, force=True)
    assert "".join(batches) == text
    assert all(len(batch.encode("utf-8")) <= 10 for batch in batches)
    assert len(batches) > len(text.encode("utf-8")) // 10


def test_bytes_split_inside_a_character_across_reads_are_decoded_whole():
    batcher = LogBatcher(max_bytes=100, max_age=1.0, clock=FakeClock())
    data = "naïve €\n".encode()
    batcher.feed(data[:3])
    batcher.feed(data[3:8])
    batcher.feed(data[8:])
    batcher.finish()
    assert batcher.take(force=True) == "naïve €\n"


def test_invalid_utf8_becomes_replacement_characters():
    batcher = LogBatcher(max_bytes=100, max_age=1.0, clock=FakeClock())
    batcher.feed(b"ok \xff\xfe end\n")
    batcher.feed(b"\xe2\x82")  # a character cut off by the end of output
    batcher.finish()
    assert batcher.take(force=True) == "ok \ufffd\ufffd end\n\ufffd"


def test_order_is_kept_across_many_batches():
    batcher = LogBatcher(max_bytes=64, max_age=1.0, clock=FakeClock())
    lines = [f"line {i}\n" for i in range(500)]
    for line in lines:
        batcher.add(line)
    assert "".join(drain(batcher, force=True)) == "".join(lines)


def test_output_beyond_the_memory_cap_is_dropped_and_the_log_says_how_much():
    clock = FakeClock()
    batcher = LogBatcher(max_bytes=10, max_age=1.0, max_buffered=20, clock=clock)
    batcher.add("a" * 20)
    batcher.add("x" * 7)  # no room: dropped
    assert drain(batcher) == ["a" * 10, "a" * 10]
    batcher.add("c" * 5)
    text = "".join(drain(batcher, force=True))
    assert "7 bytes of output dropped" in text
    assert text.endswith("ccccc")
    assert "x" not in text


def test_a_drop_at_the_very_end_is_reported_on_finish():
    batcher = LogBatcher(max_bytes=100, max_age=1.0, max_buffered=5, clock=FakeClock())
    batcher.add("12345")
    batcher.add("678")
    batcher.finish()
    text = "".join(drain(batcher, force=True))
    assert text.startswith("12345")
    assert "3 bytes of output dropped" in text


def test_split_utf8_cuts_on_a_character_boundary():
    assert split_utf8("héllo", 2) == ("h", "éllo")
    assert split_utf8("héllo", 3) == ("hé", "llo")
    assert split_utf8("abc", 10) == ("abc", "")

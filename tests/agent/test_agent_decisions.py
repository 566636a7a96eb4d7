"""The agent's decisions on a fake clock: fencing, heartbeat answers, link state."""

import logging

import pytest

from croniq_runner.agent import Agent
from croniq_runner.client import Link, Transient
from croniq_runner.config import Config
from croniq_runner.timing import Backoff, LeaseBook, renewal_interval


class FakeClock:
    def __init__(self, now=500.0):
        self.now = now

    def __call__(self):
        return self.now


class FakeJob:
    def __init__(self, execution_id, lease=1):
        self.id, self.lease = execution_id, lease
        self.running = True
        self.kills = []
        self.ticks = []

    holds_lease = True
    waiting_for_lapse = False

    def kill(self, reason, grace):
        self.kills.append((reason, grace))

    def give_up_lease(self, grace, report_after):
        self.report_after = report_after
        self.holds_lease = False
        self.kill("fenced", grace)

    def tick(self, now, kill_grace):
        self.ticks.append(now)


class SlowServer:
    """Answers a heartbeat after `latency` seconds of fake time."""

    def __init__(self, clock, answer, latency=0.0):
        self.clock, self.answer, self.latency = clock, answer, latency
        self.calls = []

    def post(self, path, body, timeout):
        self.calls.append((path, body))
        self.clock.now += self.latency
        return self.answer


class Unreachable:
    def post(self, path, body, timeout):
        raise Transient("timed out")


@pytest.fixture
def clock():
    return FakeClock()


def make_agent(clock, *jobs, lease_ttl=30.0, kill_grace=10.0):
    config = Config(server="http://croniq.test", token="t", name="n", kill_grace=kill_grace)
    agent = Agent(config, clock=clock)
    agent.runner_id = 1
    agent.lease_ttl = lease_ttl
    agent.leases = LeaseBook(lease_ttl, clock=clock)
    for job in jobs:
        agent.jobs[job.id] = job
        agent.leases.renewed(job.id, clock.now)
    return agent


def test_a_job_is_fenced_once_its_lease_could_not_be_renewed_in_time(clock):
    job = FakeJob(1)
    agent = make_agent(clock, job, lease_ttl=3.0)
    clock.now += 1.9
    agent.watch(clock.now)
    assert job.kills == []
    clock.now += 0.1  # ttl 3 - margin 1
    agent.watch(clock.now)
    assert job.kills == [("fenced", 0.5)]
    agent.watch(clock.now + 1)
    assert len(job.kills) == 1


def test_a_fenced_job_is_renewed_no_more_and_reported_after_its_lease_lapsed(clock):
    fenced, healthy = FakeJob(1), FakeJob(2)
    agent = make_agent(clock, fenced, healthy, lease_ttl=30.0)
    agent.client = SlowServer(clock, {"renewed": [1, 2], "lost": [], "cancel": []})
    agent.heartbeat()
    clock.now += 15
    agent.client = Unreachable()
    with pytest.raises(Transient):
        agent.heartbeat()  # may still reach the server and renew, within its 10 s timeout
    agent.leases.renewed(2, clock.now)
    clock.now += 5
    agent.watch(clock.now)
    assert fenced.kills == [("fenced", 5.0)]
    # The server lets go 30 s after the last renewal it may have made (the
    # unanswered heartbeat, at the latest when it timed out), plus 3 s for
    # the reaper: then the server has settled it lost and retried it.
    assert fenced.report_after == (515 + 10) + 30 + 3
    agent.client = SlowServer(clock, {"renewed": [2], "lost": [], "cancel": []})
    agent.heartbeat()
    assert agent.client.calls[-1][1]["executions"] == [{"id": 2, "lease": 1}]


def test_a_job_that_already_ended_is_not_fenced(clock):
    job = FakeJob(1)
    job.running = False
    agent = make_agent(clock, job, lease_ttl=3.0)
    agent.watch(clock.now + 10)
    assert job.kills == []
    assert job.ticks == [clock.now + 10]


def test_a_renewal_counts_from_when_the_heartbeat_was_sent_not_answered(clock):
    job = FakeJob(1)
    agent = make_agent(clock, job, lease_ttl=30.0)
    sent_at = clock.now + 5
    clock.now = sent_at
    agent.client = SlowServer(clock, {"renewed": [1], "lost": [], "cancel": []}, latency=4.0)
    agent.heartbeat()
    assert agent.client.calls[0][1]["executions"] == [{"id": 1, "lease": 1}]
    # deadline = sent_at + ttl 30 - margin 10, whatever the answer's latency
    assert agent.leases.remaining(1, now=sent_at) == 20.0


def test_heartbeat_answers_kill_lost_jobs_fast_and_cancelled_ones_gracefully(clock):
    lost, cancelled, kept = FakeJob(1), FakeJob(2), FakeJob(3)
    agent = make_agent(clock, lost, cancelled, kept, lease_ttl=30.0, kill_grace=7.0)
    answer = {"renewed": [2, 3], "lost": [1], "cancel": [2]}
    agent.client = SlowServer(clock, answer)
    agent.heartbeat()
    assert lost.kills == [("lost", 5.0)]
    assert cancelled.kills == [("cancel", 7.0)]
    assert kept.kills == []
    assert agent.leases.remaining(1) is None


def test_the_link_logs_each_change_of_state_once(clock, caplog):
    caplog.set_level(logging.INFO, logger="croniq.runner")
    link = Link("http://croniq.test", clock=clock)
    link.answered()
    link.failed("connection refused")
    clock.now += 1
    link.failed("connection refused")
    link.failed("timed out")
    clock.now += 2.5
    link.answered()
    link.answered()
    assert [record.getMessage() for record in caplog.records] == [
        "lost connection to http://croniq.test (connection refused); retrying with backoff",
        "reconnected to http://croniq.test after 3.5s without it",
    ]


def test_a_server_not_reached_yet_is_reported_as_such(clock, caplog):
    caplog.set_level(logging.INFO, logger="croniq.runner")
    link = Link("http://croniq.test", clock=clock)
    link.failed("connection refused")
    clock.now += 2
    link.answered()
    assert [record.getMessage() for record in caplog.records] == [
        "cannot reach http://croniq.test (connection refused); retrying with backoff",
        "reached http://croniq.test after 2.0s without it",
    ]


def test_a_first_signal_drains_and_a_second_one_hurries(clock):
    agent = make_agent(clock)
    agent.stop("received SIGTERM")
    assert agent.stopping.is_set()
    assert not agent.hurry.is_set()
    agent.stop("received SIGINT")
    assert agent.hurry.is_set()
    assert agent.fatal is None


def test_losing_the_identity_stops_at_once_with_its_own_exit_code(clock):
    agent = make_agent(clock)
    agent.superseded("HTTP 409: superseded")
    assert agent.stopping.is_set() and agent.hurry.is_set()
    assert agent.fatal.code == 4
    agent.unauthorized("HTTP 401: bad token")
    assert agent.fatal.code == 4  # the first cause is the one reported


def test_after_an_outage_the_agent_registers_again_and_adopts_shorter_leases(clock):
    agent = make_agent(clock, FakeJob(1), lease_ttl=30.0)
    agent.heartbeat_interval = 10.0
    agent.link.outages = 1
    registration = {"runner_id": 1, "session": agent.session, "takeover": False,
                    "heartbeat_interval": 2.0, "lease_ttl": 6.0}  # fmt: skip
    agent.client = SlowServer(clock, registration)
    agent.beat_once(Backoff())
    path, body = agent.client.calls[0]
    assert path == "/api/v1/runners/register"
    assert body["session"] == agent.session
    assert (agent.leases.lease_ttl, agent.heartbeat_interval) == (6.0, 2.0)
    agent.client.calls.clear()
    agent.client.answer = {"renewed": [1], "lost": [], "cancel": []}
    agent.beat_once(Backoff())
    assert [path for path, _ in agent.client.calls] == ["/api/v1/runners/1/heartbeat"]


def test_registration_is_refreshed_every_few_minutes_without_an_outage(clock):
    agent = make_agent(clock, FakeJob(1), lease_ttl=30.0)
    agent.client = SlowServer(clock, {"renewed": [1], "lost": [], "cancel": []})
    agent.beat_once(Backoff())
    assert [path for path, _ in agent.client.calls] == ["/api/v1/runners/1/heartbeat"]
    clock.now += 300
    agent.client.answer = {"runner_id": 1, "heartbeat_interval": 10.0, "lease_ttl": 30.0}
    agent.beat_once(Backoff())
    assert agent.client.calls[1][0] == "/api/v1/runners/register"
    assert agent.leases.lease_ttl == 30.0


def test_a_fenced_job_waiting_for_its_lease_to_lapse_takes_no_slot(clock):
    running, lapsing = FakeJob(1), FakeJob(2)
    lapsing.waiting_for_lapse = True
    agent = make_agent(clock, running, lapsing)
    agent.config = Config(server="http://croniq.test", token="t", name="n", capacity=2)
    assert agent.free_slots() == 1
    assert agent.busy() == [running]


class TickingServer:
    """Answers a heartbeat after `latency` seconds, the watchdog ticking meanwhile."""

    def __init__(self, agent, clock, latency):
        self.agent, self.clock, self.latency = agent, clock, latency

    def post(self, path, body, timeout):
        pass_time(self.agent, self.clock, self.latency)
        return {"renewed": [e["id"] for e in body["executions"]], "lost": [], "cancel": []}


def pass_time(agent, clock, seconds, tick=0.1):
    for _ in range(round(seconds / tick)):
        clock.now += tick
        agent.watch(clock.now)


@pytest.mark.parametrize("heartbeat_interval", [10.0, 5.0])
def test_a_healthy_job_outlives_short_leases_at_the_pace_the_server_gives(
    clock, heartbeat_interval, caplog
):
    job = FakeJob(1)
    agent = make_agent(clock)
    agent.registered({"runner_id": 1, "heartbeat_interval": heartbeat_interval, "lease_ttl": 15})
    agent.leases = LeaseBook(agent.lease_ttl, clock=clock)
    agent.jobs[job.id] = job
    agent.leases.renewed(job.id, clock.now)
    agent.client = TickingServer(agent, clock, latency=0.5)
    for _ in range(12):  # a minute of heartbeats, each answered after 0.5 s
        agent.heartbeat()
        pass_time(agent, clock, agent.heartbeat_interval - 0.5)
    assert job.kills == []
    assert agent.heartbeat_interval == 5.0
    warned = "the server asks for a heartbeat every 10.0s but grants 15.0s leases" in caplog.text
    assert warned == (heartbeat_interval == 10.0)


def test_the_renewal_pace_leaves_room_for_one_lost_heartbeat():
    assert renewal_interval(10.0, 30.0) == 10.0  # the defaults: unchanged
    assert renewal_interval(10.0, 15.0) == 5.0
    assert renewal_interval(0.5, 3.0) == 0.5
    assert renewal_interval(60.0, 600.0) == 60.0
    assert renewal_interval(300.0, 600.0) == 295.0


def test_an_unusable_state_dir_given_stops_the_agent_before_it_registers(clock, tmp_path, caplog):
    occupied = tmp_path / "a-file"
    occupied.write_text("")
    config = Config(
        server="http://croniq.test", token="t", name="n", state_dir=str(occupied),
        state_dir_given=True,
    )  # fmt: skip
    agent = Agent(config, clock=clock)
    agent.client = Unreachable()  # registering would retry for ever
    assert agent.run() == 2
    assert f"cannot keep the ledger of jobs in {occupied}" in caplog.text


def test_an_unusable_default_state_dir_only_warns(clock, tmp_path, caplog):
    occupied = tmp_path / "a-file"
    occupied.write_text("")
    config = Config(server="http://croniq.test", token="t", name="n", state_dir=str(occupied))
    agent = Agent(config, clock=clock)
    agent.open_ledger()
    assert agent.ledger is None
    assert "a restart after a kill cannot end what it left (set --state-dir)" in caplog.text


class AcceptedJob(FakeJob):
    """Stands for croniq_runner.job.Job in `Agent.accept`: starts nothing."""

    def __init__(self, assignment, **_):
        super().__init__(assignment["id"], assignment["lease"])

    def start(self):
        pass


def test_an_idle_watchdog_sleeps_until_a_job_arrives_then_watches_it(monkeypatch):
    import threading
    import time

    monkeypatch.setattr("croniq_runner.agent.Job", AcceptedJob)
    agent = make_agent(time.monotonic)
    watched = []
    agent.watch = watched.append
    watchdog = threading.Thread(target=agent.watchdog_loop, daemon=True)
    watchdog.start()
    time.sleep(0.5)
    assert watched == []  # with nothing held it looked 10 times a second

    agent.accept({"id": 7, "lease": 1, "command": "true"}, time.monotonic())
    deadline = time.monotonic() + 30  # three ticks, however slowly they come
    while len(watched) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(watched) >= 3  # a held job is watched every tick

    agent.job_done(agent.jobs[7])
    agent.shut_down()
    watchdog.join(30)
    assert not watchdog.is_alive()


class RecordingServer:
    def __init__(self):
        self.bodies = []

    def post(self, path, body, timeout):
        self.bodies.append(body)
        return {"executions": []}


def test_a_poll_says_the_runners_slots_besides_those_free_when_it_leaves(clock):
    agent = make_agent(clock, FakeJob(1))
    agent.config = Config(server="http://croniq.test", token="t", name="n", capacity=3)
    agent.client = RecordingServer()
    agent.poll_once(Backoff())
    [body] = agent.client.bodies
    assert (body["capacity"], body["slots"]) == (2, 3)


def test_a_once_poll_asks_for_one_execution_and_no_more(clock, monkeypatch):
    agent = make_agent(clock)
    agent.config = Config(server="http://croniq.test", token="t", name="n", capacity=3, once=True)
    agent.client = RecordingServer()
    monkeypatch.setattr(agent, "run_once_then_stop", lambda: None)
    agent.poll_once(Backoff())
    [body] = agent.client.bodies
    assert body["capacity"] == 1
    assert "slots" not in body


class Answering:
    """Answers every poll with `executions`."""

    def __init__(self, executions):
        self.executions = executions

    def post(self, path, body, timeout):
        return {"executions": self.executions}


def test_the_runs_of_one_answer_wait_from_its_arrival_not_from_the_starts_before(
    clock, monkeypatch
):
    waits = {}

    class Recorded(AcceptedJob):
        def __init__(self, assignment, **kwargs):
            super().__init__(assignment)
            waits[assignment["id"]] = kwargs["start_at"]

    monkeypatch.setattr("croniq_runner.agent.Job", Recorded)
    agent = make_agent(clock)
    agent.config = Config(server="http://croniq.test", token="t", name="n", capacity=3)
    work = [{"id": n, "lease": 1, "command": "true", "starts_in": 0.1} for n in (1, 2, 3)]
    agent.client = Answering(work)
    agent.poll_once(Backoff())
    assert len(set(waits.values())) == 1, waits  # the same instant for all three

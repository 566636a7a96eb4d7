"""The agent's answer to a server that says it is stopping (`stopping: true`
in a poll's answer, docs/design.md §4): poll again at once, once."""

import logging

from croniq_runner.agent import Agent
from croniq_runner.config import Config
from croniq_runner.timing import Backoff, LeaseBook


class Answers:
    """A server answering each poll with the next of `answers`."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.polls = 0

    def post(self, path, body, timeout):
        self.polls += 1
        return self.answers.pop(0)


STOPPING = {"executions": [], "stopping": True}
NOTHING = {"executions": []}


def agent_answered(*answers, once=False):
    config = Config(server="http://croniq.test", token="t", name="n", once=once)
    agent = Agent(config, clock=lambda: 100.0)
    agent.runner_id = 1
    agent.leases = LeaseBook(30.0, clock=agent.clock)
    agent.client = Answers(*answers)
    return agent


def test_a_stopping_server_is_polled_again_at_once_and_only_once_without_backoff(caplog):
    agent = agent_answered(STOPPING, STOPPING, STOPPING, NOTHING, STOPPING)
    backoff = Backoff(rand=lambda: 1.0)
    with caplog.at_level(logging.INFO, logger="croniq.runner"):
        pauses = [agent.poll_once(backoff) for _ in range(5)]
    # At once after the first; the same stopping server answering again is
    # backed off from, growing; a poll answered as usual starts afresh.
    assert pauses == [0.0, 0.5, 1.0, 0.0, 0.0]
    assert caplog.text.count("the server is stopping: polling again at once") == 2


def test_a_once_agent_polls_again_after_a_stopping_answer_without_work():
    agent = agent_answered(STOPPING, NOTHING, once=True)
    assert agent.poll_once(Backoff()) == 0.0
    assert not agent.stopping.is_set()  # not "no work was waiting": it asks again
    agent.poll_once(Backoff())
    assert agent.stopping.is_set()
    assert agent.client.polls == 2

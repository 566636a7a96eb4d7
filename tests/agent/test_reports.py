"""The agent's finish reports: those that queue while a call is on its way
go together in the next one, each answered on its own; an older server gets
each on its own."""

import threading

import pytest

from croniq_runner.client import Conflict, NotFound, Rejected, Transient, Unauthorized
from croniq_runner.reports import Reports


class Server:
    """Stands in for the HTTP client. The first batch call waits for
    `release` (a call on its way); answers are made by `answer(path, body)`."""

    def __init__(self, answer=None, hold_first=False):
        self.calls = []
        self.answer = answer or self.finish_all
        self.arrived = threading.Event()
        self.release = threading.Event()
        if not hold_first:
            self.release.set()
        self.lock = threading.Lock()

    def post(self, path, body, timeout):
        with self.lock:
            self.calls.append((path, body))
        self.arrived.set()
        self.release.wait(5)
        return self.answer(path, body)

    @staticmethod
    def finish_all(path, body):
        if path.endswith("/finish") and "/runners/" in path:
            return {
                "executions": [
                    {"id": item["id"], "status": 200, "state": "succeeded"}
                    for item in body["executions"]
                ]
            }
        return {"state": "succeeded"}


def reports_for(server, features=("finish-many",), giving_up=None, unauthorized=None):
    reports = Reports(
        server,
        "s1",
        giving_up or threading.Event(),
        unauthorized or (lambda error: None),
    )
    reports.serve(7, list(features))
    reports.start()
    return reports


def report_in_thread(reports, execution_id, exit_code=0, alone=None):
    """Report like a job's thread: returns (thread, outcome dict)."""
    outcome = {}
    body = {"session": "s1", "lease": 3, "exit_code": exit_code}

    def run():
        try:
            outcome["answer"] = reports.finish(execution_id, body, alone or (lambda: "alone"))
        except Exception as error:  # noqa: BLE001 - the test inspects it
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def queued_behind_a_call(reports, server, ids):
    """Report `ids` so that the first goes alone and the others queue while
    it is on its way; returns the (thread, outcome) of each, all answered."""
    started = [report_in_thread(reports, ids[0])]
    assert server.arrived.wait(5)
    started += [report_in_thread(reports, pk) for pk in ids[1:]]
    while len(reports._queue) < len(ids) - 1:
        threading.Event().wait(0.01)
    server.release.set()
    for thread, _ in started:
        thread.join(5)
    return [outcome for _, outcome in started]


def test_reports_that_queue_behind_a_call_on_its_way_go_together_in_the_next():
    server = Server(hold_first=True)
    outcomes = queued_behind_a_call(reports_for(server), server, [1, 2, 3, 4, 5, 6])
    # The first, alone, as the single finish; the five that queued meanwhile in one call.
    assert [path for path, _ in server.calls] == [
        "/api/v1/executions/1/finish",
        "/api/v1/runners/7/finish",
    ]
    assert server.calls[0][1] == {"session": "s1", "lease": 3, "exit_code": 0}
    body = server.calls[1][1]
    assert body["session"] == "s1"
    assert sorted(item["id"] for item in body["executions"]) == [2, 3, 4, 5, 6]
    assert all(
        item == {"id": item["id"], "lease": 3, "exit_code": 0} for item in body["executions"]
    )
    assert outcomes == [{"answer": {"state": "succeeded"}}] * 6


def test_each_report_gets_its_own_answer_or_refusal():
    def answer(path, body):
        if "/executions/" in path:
            return {"state": "succeeded"}
        return {
            "executions": [
                {"id": 2, "status": 200, "state": "failed"},
                {"id": 3, "status": 409, "detail": "not held under lease 3"},
                {"id": 4, "status": 404, "detail": "unknown execution 4"},
                {"id": 5, "status": 422, "detail": "bad"},
                {"id": 6, "status": 299},  # unknown to this agent: sent alone
            ]
        }

    server = Server(answer=answer, hold_first=True)
    outcomes = queued_behind_a_call(reports_for(server), server, [1, 2, 3, 4, 5, 6])
    assert outcomes[1] == {"answer": {"state": "failed"}}
    assert isinstance(outcomes[2]["error"], Conflict)
    assert "not held under lease 3" in str(outcomes[2]["error"])
    assert isinstance(outcomes[3]["error"], NotFound)
    assert isinstance(outcomes[4]["error"], Rejected)
    assert outcomes[5] == {"answer": "alone"}


def test_a_lone_report_refused_is_refused_to_its_job():
    def answer(path, body):
        raise Conflict("HTTP 409: not held", 409)

    thread, outcome = report_in_thread(reports_for(Server(answer=answer)), 1)
    thread.join(5)
    assert isinstance(outcome["error"], Conflict)


def test_a_server_without_the_batch_call_gets_each_report_alone():
    server = Server()
    reports = reports_for(server, features=())
    thread, outcome = report_in_thread(reports, 1)
    thread.join(5)
    assert outcome == {"answer": "alone"}
    assert server.calls == []


def test_an_older_server_answering_404_gets_each_report_alone_from_then_on():
    def answer(path, body):
        if "/runners/" in path:
            raise NotFound("HTTP 404: Not Found", 404)
        return {"state": "succeeded"}

    server = Server(answer=answer, hold_first=True)
    reports = reports_for(server)
    outcomes = queued_behind_a_call(reports, server, [1, 2, 3])
    assert outcomes == [
        {"answer": {"state": "succeeded"}},
        {"answer": "alone"},
        {"answer": "alone"},
    ]
    assert reports.many is False
    thread, outcome = report_in_thread(reports, 4)
    thread.join(5)
    assert outcome == {"answer": "alone"}
    assert len(server.calls) == 2  # the fourth went alone at once
    reports.serve(7, ["finish-many"])  # registering again asks anew
    assert reports.many is True


def test_a_batch_refused_as_a_whole_is_sent_alone():
    def answer(path, body):
        if "/runners/" in path:
            raise Rejected("HTTP 413: request body too large", 413)
        return {"state": "succeeded"}

    server = Server(answer=answer, hold_first=True)
    reports = reports_for(server)
    outcomes = queued_behind_a_call(reports, server, [1, 2, 3])
    assert outcomes[1:] == [{"answer": "alone"}] * 2
    assert reports.many is True


def test_a_call_without_an_answer_is_retried_with_the_same_reports():
    failures = [Transient("connection refused"), Transient("HTTP 503", 503)]

    def answer(path, body):
        if failures:
            raise failures.pop(0)
        return Server.finish_all(path, body)

    server = Server(answer=answer)
    reports = reports_for(server)
    thread, outcome = report_in_thread(reports, 1)
    thread.join(10)
    assert outcome == {"answer": {"state": "succeeded"}}
    assert [path for path, _ in server.calls] == ["/api/v1/executions/1/finish"] * 3


def test_reports_are_given_up_when_the_agent_exits_with_the_server_unreachable():
    def answer(path, body):
        raise Transient("connection refused")

    giving_up = threading.Event()
    reports = reports_for(Server(answer=answer), giving_up=giving_up)
    thread, outcome = report_in_thread(reports, 1)
    giving_up.set()
    thread.join(5)
    assert outcome == {"answer": None}


def test_an_unauthorized_token_is_reported_to_the_agent_and_the_reports_end():
    def answer(path, body):
        raise Unauthorized("HTTP 401: Unauthorized", 401)

    seen = []
    reports = reports_for(Server(answer=answer), unauthorized=seen.append)
    thread, outcome = report_in_thread(reports, 1)
    thread.join(5)
    assert outcome == {"answer": None}
    assert [type(error) for error in seen] == [Unauthorized]


@pytest.mark.parametrize("batch_answer", [{"executions": "all"}, ["not", "a", "dict"], {}])
def test_an_answer_that_names_no_report_sends_each_alone(batch_answer):
    def answer(path, body):
        return batch_answer if "/runners/" in path else {"state": "succeeded"}

    server = Server(answer=answer, hold_first=True)
    outcomes = queued_behind_a_call(reports_for(server), server, [1, 2, 3])
    assert outcomes[1:] == [{"answer": "alone"}] * 2

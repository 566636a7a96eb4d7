def test_healthz_answers_200_when_the_database_answers(client, db):
    answer = client.get("/healthz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok"}

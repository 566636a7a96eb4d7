"""The runners: each machine that runs jobs (Runner) and the tokens they
register with (RunnerToken). Rows only; the runner protocol is the dispatch
app's."""

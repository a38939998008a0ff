"""The server's own account of a measurement: Prometheus `/metrics` of vLLM or llama.cpp.

`scrape` reads and parses the metrics page; `crosscheck` turns two snapshots and the client's
records of one phase into the server's counts and histograms beside the client's, flagging a
disagreement; `recorder` does that around each phase of `measure`.
"""

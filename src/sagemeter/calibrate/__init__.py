"""Calibration: a server of known timing, to check that a load generator measures the server.

`running_truth_server(TruthTiming(0.05, 0.004))` yields the base URL of an OpenAI-compatible
server on 127.0.0.1 whose time to first token and inter-token gap are exactly those; see
`sagemeter.calibrate.server`.
"""

from sagemeter.calibrate.child import running_truth_server
from sagemeter.calibrate.timing import TruthTiming, parse_duration

__all__ = ["TruthTiming", "parse_duration", "running_truth_server"]

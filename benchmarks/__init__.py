"""Speed and fidelity of sagemeter itself (run with `make benchmarks`; never timed asserts)."""

"""The bounds every value shares wherever it enters (CLI options, plan tables, MCP arguments):
the numbers alone, with no import, so a light process (the truth server, a batch worker) reads
them without loading pydantic. `limits` holds the types and checks built on them; the README's
"Limits" section states them.
"""

from __future__ import annotations

DAY_S = 86_400.0
MAX_WAIT_S = DAY_S  # any timeout, startup wait, sending duration or start-at distance
MAX_LEVELS = 32  # levels in one list (1, 2, 4, … 1024 is eleven)
MAX_CONCURRENCY = 1024  # requests at once in one level of measure (file descriptors, RAM)
MAX_STREAMS = 4096  # streams at once of one load run from one machine (shards: each one's part)
MAX_RATE = 1_000_000.0  # requests per second asked of one load run
MAX_TOKENS = 1_000_000  # tokens asked of one reply or sent in one prompt
MAX_REPEATS = 1000  # decode replies of each length, warm-up requests
MAX_BATCHES = 100  # batches per level
MAX_QUESTIONS = 100_000  # questions per family, fidelity prompts
MAX_PRICE_PER_HOUR = 10_000.0  # USD per hour of one endpoint (the largest instances: ~100)
MAX_COST_USD = 1_000_000.0  # a run's spend cap
MAX_SEED = 2**63 - 1  # what every server's seed field holds
MAX_MINUTES = 100_000.0  # one arm's measurement limit (about 70 days)
MAX_DEADLINE_MINUTES = 1440.0  # the longest wait for a SageMaker endpoint to be InService
MAX_WORKERS = 512  # client processes of one load run
MAX_CONTEXT_TOKENS = 10_000_000  # a served model's context length
MAX_SESSIONS = 1024  # multi-turn sessions at once of one load run
MAX_TURNS = 64  # turns of one session
# The percentiles an SLO search can hold to: those every load result's distributions carry.
SLO_PERCENTILES = (50.0, 90.0, 99.0)

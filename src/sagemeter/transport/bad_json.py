"""What "a server's reply is not JSON" means, in one place.

`json.loads` fails on bad text with ValueError, but on text nested deeper than Python's stack
(`[[[[…`, which any server may send) with RecursionError, which would escape every
`except ValueError` as a traceback. Every parse of a server's bytes catches `BAD_JSON`.
"""

from __future__ import annotations

BAD_JSON: tuple[type[Exception], ...] = (ValueError, UnicodeDecodeError, RecursionError)

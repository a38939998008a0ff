"""The one exception type a person sees: a message they can act on, never a traceback."""


class UserError(Exception):
    """Bad input or an unmet precondition; the faces print its message on one line and exit 2."""

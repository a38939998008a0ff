"""The one exception type a person sees: a message they can act on, never a traceback."""


class UserError(Exception):
    """Bad input or an unmet precondition; the faces print its message on one line and exit 2."""


class ManyProblems(UserError):
    """Several problems of one input found at once (a plan's), so all are fixed in one go: the
    terminal shows one line each, an MCP answer one sentence (`sentence`)."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        if len(problems) == 1:
            text = f"{source}: {problems[0]}"
        else:
            lines = "\n".join(f"  {problem}" for problem in problems)
            text = f"{source}: {len(problems)} problems, one a line:\n{lines}"
        super().__init__(text)

    def sentence(self) -> str:
        """Every problem on one line, for faces that answer in one sentence."""
        if len(self.problems) == 1:
            return str(self)
        return f"{self.source}: {len(self.problems)} problems: " + "; ".join(self.problems)

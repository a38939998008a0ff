"""`python -m sagemeter` runs the CLI."""

from sagemeter.cli import main

main()

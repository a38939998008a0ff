"""Reports: a comparison or a result made readable (terminal tables so far)."""

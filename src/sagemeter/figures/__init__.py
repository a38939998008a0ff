"""Figures declared once: the `Figure` protocol, sagemeter's own declarations, the registry
that finds them and plug-ins' (entry-point group `sagemeter.figures`)."""

from sagemeter.figures.declaration import Declared, Figure
from sagemeter.figures.registry import (
    figure_named,
    figures,
    format_figure,
    problems,
    stored_value,
    top_level_figures,
    value_of,
)

__all__ = [
    "Declared",
    "Figure",
    "figure_named",
    "figures",
    "format_figure",
    "problems",
    "stored_value",
    "top_level_figures",
    "value_of",
]

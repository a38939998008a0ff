"""Figures declared once: the `Figure` and `LevelFamily` protocols (a figure, a family of
figures keyed by a level), sagemeter's own declarations, the registry that finds them and
plug-ins' (entry-point group `sagemeter.figures`)."""

from sagemeter.figures.declaration import (
    Declared,
    Figure,
    LevelFamily,
    LevelFigure,
    level_key,
    level_label,
)
from sagemeter.figures.registry import (
    figure_named,
    figures,
    format_figure,
    level_figure_named,
    level_figure_of,
    level_figures,
    level_values,
    plugin_level_figures,
    problems,
    stored_levels,
    stored_value,
    top_level_figures,
    top_level_levels,
    value_of,
)

__all__ = [
    "Declared",
    "Figure",
    "LevelFamily",
    "LevelFigure",
    "figure_named",
    "figures",
    "format_figure",
    "level_figure_named",
    "level_figure_of",
    "level_figures",
    "level_key",
    "level_label",
    "level_values",
    "plugin_level_figures",
    "problems",
    "stored_levels",
    "stored_value",
    "top_level_figures",
    "top_level_levels",
    "value_of",
]

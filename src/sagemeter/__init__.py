"""sagemeter: which checkpoint, on which machine, at what price?"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("sagemeter")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+source"

__all__ = ["__version__"]

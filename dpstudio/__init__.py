"""dpstudio: protect microdata files before release."""

__version__ = "0.1.0"

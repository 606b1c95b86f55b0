"""Panels of the main window; each runs alone with ``python -m dpstudio.app.widgets.<name>``."""

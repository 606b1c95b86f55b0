"""The dpstudio desktop app: a thin PySide6 layer over :mod:`dpstudio.engine`.

Nothing here is imported by the engine or the command line.
"""

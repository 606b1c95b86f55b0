"""Qt item models over pandas objects (no copy into widgets)."""

from dpstudio.app.models.dataframe_model import DataFrameModel  # noqa: F401

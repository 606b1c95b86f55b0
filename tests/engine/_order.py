"""Calibration tests compare released rows with the original rows.  The clustered DP methods
shuffle their release (so row order does not reveal clusters); these helpers put the rows back
in input order with ``row_map`` — the noise and the values are untouched."""

import numpy as np

from dpstudio import engine


def in_input_order(res):
    if res.row_map is not None:
        inv = np.argsort(res.row_map)
        res.data = res.data.iloc[inv].reset_index(drop=True)
        res.row_map = None
    return res


def protect_in_order(*args, **kwargs):
    return in_input_order(engine.protect(*args, **kwargs))


def run_prepared_in_order(*args, **kwargs):
    from dpstudio.engine.api import run_prepared

    return in_input_order(run_prepared(*args, **kwargs))

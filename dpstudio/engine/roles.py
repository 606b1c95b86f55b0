"""Attribute roles (docs/methods.md §1)."""

from __future__ import annotations

from enum import Enum

from dpstudio.engine.errors import ParameterError


class Role(str, Enum):
    IDENTIFIER = "identifier"
    K_QUASI = "k-quasi"
    EPS_QUASI = "eps-quasi"
    CONFIDENTIAL = "confidential"
    OTHER = "other"
    #: sampling weight: released unchanged, read by the risk models (issue 10)
    WEIGHT = "weight"
    #: household (cluster) id: not released unless the user asks (``keep_household``)
    HOUSEHOLD = "household"

    @property
    def label(self) -> str:
        return {
            "identifier": "identifier",
            "k-quasi": "k-quasi-identifier",
            "eps-quasi": "ε-quasi-identifier",
            "confidential": "confidential",
            "other": "other",
            "weight": "sampling weight",
            "household": "household id",
        }[self.value]


_ALIASES = {
    "id": Role.IDENTIFIER,
    "identifier": Role.IDENTIFIER,
    "k-quasi": Role.K_QUASI,
    "kquasi": Role.K_QUASI,
    "k_quasi": Role.K_QUASI,
    "quasi": Role.K_QUASI,
    "eps-quasi": Role.EPS_QUASI,
    "epsilon-quasi": Role.EPS_QUASI,
    "eps_quasi": Role.EPS_QUASI,
    "ε-quasi": Role.EPS_QUASI,
    "confidential": Role.CONFIDENTIAL,
    "sensitive": Role.CONFIDENTIAL,
    "other": Role.OTHER,
    "weight": Role.WEIGHT,
    "sampling-weight": Role.WEIGHT,
    "household": Role.HOUSEHOLD,
    "hid": Role.HOUSEHOLD,
    "cluster": Role.HOUSEHOLD,
}


def parse_role(value: str | Role, column: str = "?") -> Role:
    if isinstance(value, Role):
        return value
    key = str(value).strip().lower()
    if key in _ALIASES:
        return _ALIASES[key]
    raise ParameterError(
        f"Column {column!r}: unknown role {value!r}. Use one of: " + ", ".join(r.value for r in Role) + "."
    )


def normalize_roles(columns, roles: dict | None) -> dict[str, Role]:
    """Return a role for every column (default ``other``); reject unknown columns."""
    roles = dict(roles or {})
    cols = [str(c) for c in columns]
    unknown = [c for c in roles if str(c) not in cols]
    if unknown:
        raise ParameterError(
            f"Role given for column(s) not in the data: {', '.join(map(repr, unknown))}. "
            f"Available columns: {', '.join(cols)}."
        )
    out = {c: Role.OTHER for c in cols}
    for c, r in roles.items():
        out[str(c)] = parse_role(r, str(c))
    return out


def columns_with(roles: dict[str, Role], *wanted: Role) -> list[str]:
    return [c for c, r in roles.items() if r in wanted]


def single_column(roles: dict[str, Role], role: Role) -> str | None:
    """The one column with ``role`` (None when there is none); two or more are refused."""
    cols = columns_with(roles, role)
    if len(cols) > 1:
        raise ParameterError(
            f"Only one column can be the {role.label}; marked: {', '.join(map(repr, cols))}. "
            "Give the others another role."
        )
    return cols[0] if cols else None


# --------------------------------------------------------------------------- column types

#: The column types a user can choose (issue 10): how a column's values are compared.
#: ``integer`` is a numeric type whose values are whole numbers (counts, days a week, income
#: bands used as quantities): its noisy values are drawn on the grid of whole numbers (γ = 1)
#: and released as integers (issue 21 §3 N2: this is declared, never read off the data).
TYPES = ("numeric", "integer", "categorical", "ordinal", "date")
#: The declared type whose default output precision is 1 (whole numbers).
INTEGER_TYPE = "integer"
#: Types whose codes are labels, not quantities: numeric-only methods refuse them.
NON_NUMERIC_TYPES = ("categorical", "ordinal")
_TYPE_ALIASES = {
    "numeric": "numeric",
    "number": "numeric",
    "continuous": "numeric",
    "integer": "integer",
    "int": "integer",
    "whole": "integer",
    "count": "integer",
    "categorical": "categorical",
    "nominal": "categorical",
    "category": "categorical",
    "ordinal": "ordinal",
    "ordered": "ordinal",
    "date": "date",
}
#: An integer column with at most this many distinct values is suggested as categorical.
SUGGEST_MAX_CATEGORIES = 20


def normalize_types(columns, types: dict | None) -> dict[str, str]:
    """The user's column types (``{column: type}``), validated: known columns, known types.
    Columns not listed have no declared type: the engine then treats a numeric column as
    ``numeric`` (never ``integer`` because of its values or dtype: a public default must not
    depend on the data).
    """
    cols = [str(c) for c in columns]
    out: dict[str, str] = {}
    for c, t in dict(types or {}).items():
        c = str(c)
        if c not in cols:
            raise ParameterError(
                f"Type given for column {c!r}, which is not in the data. "
                f"Available columns: {', '.join(cols)}."
            )
        key = str(getattr(t, "value", t)).strip().lower()
        if key not in _TYPE_ALIASES:
            raise ParameterError(f"Column {c!r}: unknown type {t!r}. Use one of: " + ", ".join(TYPES) + ".")
        out[c] = _TYPE_ALIASES[key]
    return out


def declared_integer(types: dict | None, column: str) -> bool:
    """Whether ``column`` is declared of type ``integer`` (the only source of the integer
    grid: the data's values and dtype never decide it).
    """
    return (types or {}).get(column) == INTEGER_TYPE


def suggest_types(df, max_categories: int = SUGGEST_MAX_CATEGORIES) -> dict[str, str]:
    """A suggested type for every column of ``df`` (the app offers it; the user decides).

    * datetime columns: ``date``;
    * booleans, text and pandas categoricals: ``categorical`` (``ordinal`` for an ordered
      pandas categorical);
    * integer-valued numeric columns (integer dtype, or floats that are all whole numbers) with
      at most ``max_categories`` distinct values: ``categorical`` -- codes such as sex = 1/2 or
      roof type = 1..9, which a numeric method would average into 1.5;
    * other integer-valued numeric columns: ``integer`` (counts, amounts in whole units);
    * every other numeric column: ``numeric``.

    Pure: reads the frame, changes nothing.  A suggestion reads the data, so it is shown to
    the user and never used by the engine until the user declares it.

    >>> import pandas as pd
    >>> suggest_types(pd.DataFrame({"SEX": [1, 2, 1], "INCOME": [10.5, 3.2, 8.0],
    ...                             "NAME": ["a", "b", "c"]}))
    {'SEX': 'categorical', 'INCOME': 'numeric', 'NAME': 'categorical'}
    >>> suggest_types(pd.DataFrame({"DAYS": range(40)}))
    {'DAYS': 'integer'}
    """
    import numpy as np
    import pandas as pd

    out: dict[str, str] = {}
    for c in df.columns:
        s = df[c]
        if isinstance(s.dtype, pd.CategoricalDtype):
            out[str(c)] = "ordinal" if s.dtype.ordered else "categorical"
        elif pd.api.types.is_datetime64_any_dtype(s):
            out[str(c)] = "date"
        elif pd.api.types.is_bool_dtype(s) or not pd.api.types.is_numeric_dtype(s):
            out[str(c)] = "categorical"
        else:
            v = s.dropna().to_numpy(dtype=np.float64)
            whole = pd.api.types.is_integer_dtype(s) or bool(np.all(v == np.round(v)))
            # (a prefix with too many values already decides it: 0.3 s less on 200,000 floats)
            few = pd.unique(v[:4096]).size <= max_categories and pd.unique(v).size <= max_categories
            if whole and few and v.size:
                out[str(c)] = "categorical"
            else:
                out[str(c)] = INTEGER_TYPE if (whole and v.size) else "numeric"
    return out

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

    @property
    def label(self) -> str:
        return {
            "identifier": "identifier",
            "k-quasi": "k-quasi-identifier",
            "eps-quasi": "ε-quasi-identifier",
            "confidential": "confidential",
            "other": "other",
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
}


def parse_role(value: "str | Role", column: str = "?") -> Role:
    if isinstance(value, Role):
        return value
    key = str(value).strip().lower()
    if key in _ALIASES:
        return _ALIASES[key]
    raise ParameterError(
        f"Column {column!r}: unknown role {value!r}. Use one of: "
        + ", ".join(r.value for r in Role) + "."
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

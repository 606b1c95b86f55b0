"""The household survey set-up two app tests share: roles, types, domains and k-eps (k 5, ε 1)."""

HOUSEHOLD_ROLES = {
    "hh_id": "household",
    "region": "k-quasi",
    "sex": "k-quasi",
    "age": "k-quasi",
    "income": "eps-quasi",
    "weight": "weight",
}


def set_household_keps(win, *, check_applicable: bool = False) -> None:
    """Give the household file's roles, types and domains, and choose k-eps (k = 5, ε = 1)."""
    win.roles_panel.set_roles(dict(HOUSEHOLD_ROLES))
    win.roles_panel.set_types({"region": "categorical", "sex": "categorical"})
    win.state.set_domain("age", (0, 110))
    win.state.set_domain("income", (0, 500000))
    win.method_panel.select_method("k-eps")
    if check_applicable:
        assert win.method_panel.applicability_error() == ""
    win.method_panel.set_values({"k": 5, "epsilon": 1.0})

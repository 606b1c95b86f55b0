"""A realistic synthetic household survey (issue 24), written as SPSS .sav with value labels.

One record per person, grouped in households of 1–9 persons, with what an EU-SILC-like file
holds and what makes it hard to protect: a household id, region and degree of urbanisation,
the person's relationship to the reference person, age, sex, marital status, education,
economic status (missing for children under 16, as in the real surveys), person and household
incomes (skewed, zero for many), a household design weight and a person weight.  Every code
has its SPSS value label, every variable its label and measure level; integer codes are
declared ``F<n>.0``.  Nothing comes from real people: the distributions are plausible, not
estimates of any country.

Usage::

    python3 scripts/make_household_survey.py                        # the shipped sample
    python3 scripts/make_household_survey.py --persons 200000 --seed 7 --out big.sav

The shipped sample is ``resources/household_survey/household_survey.sav`` (seed 2024, about
15,000 persons); ``--csv`` also writes a CSV of the codes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

REGIONS = {
    1: "North-West",
    2: "North-East",
    3: "Capital region",
    4: "Centre",
    5: "South-West",
    6: "South-East",
    7: "Islands",
    8: "Mountain districts",
}
REGION_SHARE = np.array([0.14, 0.12, 0.22, 0.15, 0.11, 0.13, 0.05, 0.08])
URBAN = {1: "Densely populated", 2: "Intermediate", 3: "Thinly populated"}
URBAN_BY_REGION = {  # P(urbanisation | region)
    1: (0.45, 0.35, 0.20),
    2: (0.35, 0.40, 0.25),
    3: (0.85, 0.12, 0.03),
    4: (0.30, 0.40, 0.30),
    5: (0.30, 0.35, 0.35),
    6: (0.35, 0.35, 0.30),
    7: (0.20, 0.40, 0.40),
    8: (0.05, 0.30, 0.65),
}
SEX = {1: "Male", 2: "Female"}
RELATION = {
    1: "Reference person",
    2: "Spouse or partner",
    3: "Child",
    4: "Parent or parent-in-law",
    5: "Other relative",
    6: "Not related",
}
MARITAL = {1: "Never married", 2: "Married or registered partnership", 3: "Separated or divorced", 4: "Widowed"}
EDUCATION = {
    0: "Early childhood / none",
    1: "Primary",
    2: "Lower secondary",
    3: "Upper secondary",
    4: "Post-secondary non-tertiary",
    5: "Short-cycle tertiary",
    6: "Bachelor or equivalent",
    7: "Master or equivalent",
    8: "Doctorate",
}
ECON = {
    1: "Employee, full-time",
    2: "Employee, part-time",
    3: "Self-employed",
    4: "Unemployed",
    5: "Pupil or student",
    6: "Retired",
    7: "Unable to work (long-term illness or disability)",
    8: "Fulfilling domestic tasks",
    9: "Other inactive",
}
#: household sizes 1..9 (a European-like distribution with a thin tail)
SIZE_SHARE = np.array([0.33, 0.31, 0.15, 0.12, 0.05, 0.022, 0.01, 0.005, 0.003])

VAR_LABELS = {
    "hh_id": "Household identification number",
    "person_nr": "Person number within the household",
    "region": "Region (NUTS-like)",
    "urban": "Degree of urbanisation",
    "hh_size": "Number of household members",
    "relation": "Relationship to the reference person",
    "sex": "Sex",
    "age": "Age in completed years at the interview",
    "marital": "Legal marital status",
    "education": "Highest level of education attained (ISCED-like)",
    "econ_status": "Self-defined current economic status (persons aged 16 and over)",
    "income_person": "Person's gross income from work and pensions, last year (€)",
    "income_hh": "Household disposable income, last year (€)",
    "hh_weight": "Household design weight",
    "person_weight": "Person cross-sectional weight",
}


def _household(rng: np.random.Generator, size: int) -> list[dict]:
    """The members of one household: relations, ages, sexes, marital status."""
    members: list[dict] = []
    # reference person
    if size == 1:
        ref_age = int(np.clip(rng.choice([rng.normal(32, 8), rng.normal(72, 10)], p=[0.45, 0.55]), 18, 99))
    else:
        ref_age = int(np.clip(rng.normal(47, 14), 19, 95))
    ref_sex = int(rng.choice([1, 2], p=[0.58, 0.42]))
    members.append({"relation": 1, "age": ref_age, "sex": ref_sex})
    left = size - 1
    partner = left > 0 and rng.random() < (0.82 if size > 2 else 0.70)
    if partner:
        age = int(np.clip(ref_age + rng.normal(-2 if ref_sex == 1 else 2, 4), 18, 99))
        members.append({"relation": 2, "age": age, "sex": 3 - ref_sex if rng.random() < 0.97 else ref_sex})
        left -= 1
    parents_age = min(m["age"] for m in members)
    n_children = left if ref_age < 62 else min(left, int(rng.integers(0, left + 1)))
    for _ in range(n_children):
        hi = max(parents_age - 17, 1)
        age = int(np.clip(rng.triangular(0, min(hi, 12), min(hi, 30)), 0, hi))
        members.append({"relation": 3, "age": age, "sex": int(rng.choice([1, 2]))})
    for _ in range(left - n_children):
        rel = int(rng.choice([4, 5, 6], p=[0.45, 0.35, 0.20]))
        age = (
            int(np.clip(ref_age + rng.normal(27, 5), 50, 101))
            if rel == 4
            else int(np.clip(rng.normal(35, 18), 0, 95))
        )
        members.append({"relation": rel, "age": age, "sex": int(rng.choice([1, 2], p=[0.4, 0.6]))})
    return members


def make_survey(n_persons: int = 15_000, *, seed: int = 2024) -> pd.DataFrame:
    """The survey, one row per person (about ``n_persons``: whole households)."""
    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    hh = 0
    while len(rows) < n_persons:
        hh += 1
        size = int(rng.choice(np.arange(1, 10), p=SIZE_SHARE / SIZE_SHARE.sum()))
        region = int(rng.choice(np.arange(1, 9), p=REGION_SHARE / REGION_SHARE.sum()))
        urban = int(rng.choice([1, 2, 3], p=URBAN_BY_REGION[region]))
        for i, m in enumerate(_household(rng, size), start=1):
            rows.append({"hh_id": 100_000 + hh, "person_nr": i, "region": region, "urban": urban, "hh_size": size, **m})
    df = pd.DataFrame(rows)
    n = len(df)
    age = df["age"].to_numpy()
    adult = age >= 16
    # marital status
    mar = np.ones(n, dtype=np.int64)
    p_married = np.clip((age - 20) / 25, 0, 0.65)
    u = rng.random(n)
    mar[(u < p_married) & (age >= 18)] = 2
    mar[(df["relation"].to_numpy() == 2)] = 2
    div = (rng.random(n) < np.clip((age - 30) / 200, 0, 0.15)) & (mar == 2) & (df["relation"].to_numpy() != 2)
    mar[div] = 3
    wid = (rng.random(n) < np.clip((age - 60) / 60, 0, 0.5)) & (age >= 60) & (df["relation"].to_numpy() != 2)
    mar[wid] = 4
    df["marital"] = mar
    # education: by age (younger cohorts more tertiary), children by their age
    edu = np.zeros(n, dtype=np.int64)
    p = np.array([0.02, 0.10, 0.18, 0.35, 0.06, 0.06, 0.13, 0.09, 0.01])
    for i in np.flatnonzero(age >= 25):
        shift = np.clip((65 - age[i]) / 40, 0, 1)
        q = p * np.array([1.6, 1.6, 1.3, 1.0, 1.0, 1.0, 0.6 + 0.8 * shift, 0.5 + 1.0 * shift, 0.5 + shift])
        edu[i] = rng.choice(9, p=q / q.sum())
    young = (age >= 6) & (age < 25)
    edu[young] = np.clip((age[young] - 4) // 4, 1, 6)
    df["education"] = edu
    # economic status: missing (system-missing in SPSS) for children under 16
    econ = np.full(n, np.nan)
    for i in np.flatnonzero(adult):
        a = age[i]
        if a < 20:
            pr = [0.08, 0.05, 0.0, 0.07, 0.78, 0.0, 0.0, 0.0, 0.02]
        elif a < 30:
            pr = [0.50, 0.10, 0.04, 0.11, 0.18, 0.0, 0.02, 0.03, 0.02]
        elif a < 55:
            pr = [0.58, 0.10, 0.10, 0.07, 0.01, 0.01, 0.04, 0.07, 0.02]
        elif a < 65:
            pr = [0.38, 0.08, 0.09, 0.06, 0.0, 0.27, 0.06, 0.05, 0.01]
        else:
            pr = [0.02, 0.02, 0.03, 0.0, 0.0, 0.88, 0.02, 0.02, 0.01]
        pr_a = np.array(pr)
        econ[i] = rng.choice(np.arange(1, 10), p=pr_a / pr_a.sum())
    df["econ_status"] = econ
    # person income (€ per year): lognormal by status and education; 0 for most without work
    base = {1: 31_000, 2: 14_000, 3: 27_000, 4: 3_500, 5: 1_200, 6: 19_000, 7: 11_000, 8: 0, 9: 2_000}
    inc = np.zeros(n)
    for i in np.flatnonzero(adult):
        b = base[int(econ[i])]
        if b == 0 or (b < 4000 and rng.random() < 0.55):
            continue
        b *= 1 + 0.09 * (edu[i] - 3)
        inc[i] = rng.lognormal(np.log(max(b, 500)), 0.55 if econ[i] != 3 else 0.95)
    df["income_person"] = np.round(inc, -1)  # whole tens of euros
    # household disposable income: members' incomes after tax plus transfers, per household
    net = 0.78 * df["income_person"].to_numpy()
    hh_net = pd.Series(net).groupby(df["hh_id"].to_numpy()).transform("sum").to_numpy()
    kids = pd.Series((age < 18).astype(float)).groupby(df["hh_id"].to_numpy()).transform("sum").to_numpy()
    transfers = 2_400 * kids + rng.gamma(1.2, 900, n).round(0) * (df["person_nr"].to_numpy() == 1)
    t_hh = pd.Series(transfers).groupby(df["hh_id"].to_numpy()).transform("sum").to_numpy()
    df["income_hh"] = np.round(hh_net + t_hh, 0)
    # weights: a design weight by region (sampling fractions differ) with a non-response factor
    # by urbanisation, equal for the members of a household; the person weight is the household
    # weight with a small calibration factor by sex and age group
    frac = {1: 1 / 420, 2: 1 / 380, 3: 1 / 610, 4: 1 / 350, 5: 1 / 300, 6: 1 / 330, 7: 1 / 180, 8: 1 / 160}
    hh_ids, first = np.unique(df["hh_id"].to_numpy(), return_index=True)
    reg = df["region"].to_numpy()[first]
    urb = df["urban"].to_numpy()[first]
    w_hh = np.array([1 / frac[int(r)] for r in reg]) * np.array([1.25, 1.1, 1.0])[urb - 1]
    w_hh *= rng.uniform(0.85, 1.15, len(hh_ids))
    pos = np.searchsorted(hh_ids, df["hh_id"].to_numpy())
    df["hh_weight"] = np.round(w_hh[pos], 3)
    agegrp = np.digitize(age, [16, 30, 50, 65])
    cal = np.array([1.02, 1.06, 0.98, 0.97, 1.01])[agegrp] * np.where(df["sex"].to_numpy() == 1, 1.01, 0.99)
    df["person_weight"] = np.round(df["hh_weight"].to_numpy() * cal, 3)
    cols = [
        "hh_id", "person_nr", "region", "urban", "hh_size", "relation", "sex", "age", "marital",
        "education", "econ_status", "income_person", "income_hh", "hh_weight", "person_weight",
    ]  # fmt: skip
    return df[cols]


def write_sav(df: pd.DataFrame, path: str | Path) -> None:
    """The survey as SPSS .sav: value labels, variable labels, formats and measure levels."""
    import pyreadstat

    labels = {
        "region": REGIONS,
        "urban": URBAN,
        "sex": SEX,
        "relation": RELATION,
        "marital": MARITAL,
        "education": EDUCATION,
        "econ_status": ECON,
    }
    fmt = {c: "F2.0" for c in labels} | {
        "hh_id": "F6.0",
        "person_nr": "F1.0",
        "hh_size": "F1.0",
        "age": "F3.0",
        "income_person": "F8.0",
        "income_hh": "F8.0",
        "hh_weight": "F9.3",
        "person_weight": "F9.3",
    }
    measure = {c: "nominal" for c in ("hh_id", "region", "sex", "relation", "marital", "econ_status")}
    measure |= {"urban": "ordinal", "education": "ordinal"}
    measure |= {c: "scale" for c in df.columns if c not in measure}
    out = df.astype({c: float for c in df.columns})
    pyreadstat.write_sav(
        out,
        str(path),
        column_labels=[VAR_LABELS[c] for c in df.columns],
        variable_value_labels={c: {float(k): v for k, v in m.items()} for c, m in labels.items()},
        variable_format=fmt,
        variable_measure=measure,
        compress=True,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--persons", type=int, default=15_000, help="about this many persons (whole households)")
    ap.add_argument("--seed", type=int, default=2024)
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--out", default=str(here / "resources" / "household_survey" / "household_survey.sav"))
    ap.add_argument("--csv", action="store_true", help="also write the codes as CSV next to it")
    a = ap.parse_args(argv)
    if not 10 <= a.persons <= 50_000_000:
        ap.error("--persons must be in [10, 50000000]")
    df = make_survey(a.persons, seed=a.seed)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_sav(df, out)
    if a.csv:
        df.to_csv(out.with_suffix(".csv"), index=False)
    print(f"{out}: {len(df):,} persons in {df['hh_id'].nunique():,} households")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

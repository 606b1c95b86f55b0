"""The publications the methods implement, cited as a reader can find them (author, title,
venue, year).  A method's ``MethodSpec.paper`` is built from these; the section numbers
point into the publication itself (issue 11: no internal file numbers).
"""

SORIA_COMAS_2013_TRUSTCOM = (
    "J. Soria-Comas, J. Domingo-Ferrer, D. Sánchez, S. Martínez: “Improving the utility of "
    "differentially private data releases via k-anonymity”, 12th IEEE International "
    "Conference on Trust, Security and Privacy in Computing and Communications (TrustCom), 2013"
)
SORIA_COMAS_2025_TDP = (
    "J. Soria-Comas, D. Sánchez, J. Domingo-Ferrer, S. Martínez, L. Del Vasto-Terrientes: "
    "“Conciliating privacy and utility in data releases via individual differential privacy "
    "and microaggregation”, Transactions on Data Privacy 18(1):29–50, 2025"
)
SANCHEZ_2014_PSD = (
    "D. Sánchez, J. Domingo-Ferrer, S. Martínez: “Improving the utility of differential "
    "privacy via univariate microaggregation”, Privacy in Statistical Databases (PSD 2014), "
    "LNCS 8744, Springer, 2014"
)
HOLOHAN_2017 = (
    "N. Holohan, S. Antonatos, S. Braghin, P. Mac Aonghusa: “(k, ε)-anonymity: k-anonymity "
    "with ε-differential privacy”, arXiv:1710.01615, 2017"
)
SORIA_COMAS_2013_THESIS = (
    "J. Soria-Comas: “Improving data utility in differential privacy and k-anonymity”, PhD "
    "thesis, Universitat Rovira i Virgili, Tarragona, 2013"
)
TEMPL_2015_JSS = (
    "M. Templ, A. Kowarik, B. Meindl: “Statistical Disclosure Control for Micro-Data Using the "
    "R Package sdcMicro”, Journal of Statistical Software 67(4), 2015 (function localSuppression)"
)

#: short names used in the user guide and the glossary
ALL = {
    "soria-comas-2013": SORIA_COMAS_2013_TRUSTCOM,
    "soria-comas-2025": SORIA_COMAS_2025_TDP,
    "sanchez-2014": SANCHEZ_2014_PSD,
    "holohan-2017": HOLOHAN_2017,
    "soria-comas-thesis-2013": SORIA_COMAS_2013_THESIS,
    "templ-2015": TEMPL_2015_JSS,
}


def cite(*parts: str) -> str:
    """Join citations (each optionally followed by its section) with '; '."""
    return "; ".join(parts)

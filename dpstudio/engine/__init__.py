"""The dpstudio engine: pure Python + numpy/pandas/scipy.  Never imports Qt.

>>> from dpstudio import engine
>>> any(m["id"] == "ir-dp" for m in engine.methods())
True
"""

from dpstudio.engine.api import (  # noqa: F401
    check_applicable,
    evaluate,
    methods,
    prepare,
    protect,
    run_prepared,
)
from dpstudio.engine.errors import (  # noqa: F401
    Cancelled,
    DPStudioError,
    InputError,
    NotApplicableError,
    ParameterError,
    PrivacyLeakWarning,
)
from dpstudio.engine.sweeps import sweep  # noqa: F401
from dpstudio.engine.types import ProtectionResult  # noqa: F401
from dpstudio.engine.roles import Role  # noqa: F401
from dpstudio.engine.measures.survey_risk import RiskReport, assess_risk  # noqa: F401,E402
from dpstudio.engine.query import BudgetLedger, QueryAnswer, refine_query  # noqa: F401,E402

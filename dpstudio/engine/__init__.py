"""The dpstudio engine: pure Python + numpy/pandas/scipy.  Never imports Qt.

>>> from dpstudio import engine
>>> any(m["id"] == "ir-dp" for m in engine.methods())
True
"""

# ``dpstudio.engine.methods`` (subpackage) and ``dpstudio.engine.sweep`` (module) share names
# with API functions.  Importing a submodule the first time binds it as an attribute of this
# package, so load both submodules *before* binding the functions below; later imports of
# them find them in sys.modules and leave ``engine.methods`` / ``engine.sweep`` alone.
import dpstudio.engine.methods  # noqa: F401  isort: skip
import dpstudio.engine.sweep  # noqa: F401  isort: skip
from dpstudio.engine.api import (  # noqa: F401
    check_applicable,
    evaluate,
    methods,
    prepare,
    protect,
    run_prepared,
    sweep,
)
from dpstudio.engine.errors import (  # noqa: F401
    Cancelled,
    DPStudioError,
    InputError,
    NotApplicableError,
    ParameterError,
    PrivacyLeakWarning,
)
from dpstudio.engine.job import ProtectionResult  # noqa: F401
from dpstudio.engine.roles import Role  # noqa: F401

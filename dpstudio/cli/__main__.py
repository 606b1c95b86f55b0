"""``python -m dpstudio.cli COMMAND ...``: the command line without the app."""

import sys

from dpstudio.cli import main

sys.exit(main())

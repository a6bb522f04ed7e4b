"""python -m suites.selfbench"""

import sys

from suites.selfbench.main import main

sys.exit(main())

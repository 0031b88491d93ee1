# SPDX-License-Identifier: MIT
import sys

from rtlab.cli import main

sys.exit(main())

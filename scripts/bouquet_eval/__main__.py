"""`python -m bouquet_eval`: the `bouquet-eval` command."""

import sys

from bouquet_eval.cli import main

sys.exit(main())

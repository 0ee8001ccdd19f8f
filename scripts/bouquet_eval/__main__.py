"""`python -m bouquet_eval`: the `bouquet-eval` command."""

import sys

from bouquet_eval.command.cli import main

sys.exit(main())

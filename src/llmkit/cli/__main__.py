"""``python -m llmkit.cli``: the ``llmkit`` command without its console script."""

import sys

from llmkit.cli import main

sys.exit(main())

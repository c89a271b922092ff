"""``python -m voicelat``."""

from voicelat.cli import main

raise SystemExit(main())

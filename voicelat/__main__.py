"""``python -m voicelat``."""

from voicelat.cli.main import main

raise SystemExit(main())

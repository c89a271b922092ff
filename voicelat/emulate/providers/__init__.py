"""Provider emulators, one module per provider protocol (see voicelat.emulate.registry)."""

"""Settings modules: ``base`` (embedded defaults for running locally), ``test``, ``production``."""

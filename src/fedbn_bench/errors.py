"""The user-facing errors: bad input, reported before any training starts.

Every error a user can cause by a config value, a dataset root or a partition that cannot be
satisfied is a ``UserError``; ``run.py`` prints its message as one ``error:`` line and exits with
status 2. Every message names the config key at fault and what is allowed. Each part of the
project raises its own subclass (``ConfigError`` here, ``DatasetError`` in ``data/``,
``PartitionError`` in ``partition/``).
"""


class UserError(ValueError):
    """Bad input, reported as one ``error:`` line and exit status 2 before training."""


class ConfigError(UserError):
    """An invalid configuration value (the message names the key and the allowed values)."""

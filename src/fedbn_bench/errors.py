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


class Stopped(KeyboardInterrupt):
    """A stop asked for by a signal (SIGTERM from SLURM, ``timeout``, ``docker stop``), handled as
    Ctrl-C is: the run records ``interrupted`` and exits with ``128 + signum``."""

    def __init__(self, signum: int, name: str) -> None:
        super().__init__(name)
        self.signum, self.name = signum, name

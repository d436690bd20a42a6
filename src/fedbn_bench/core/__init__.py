"""The types every layer shares: client updates, statistics, aggregation, update transforms,
per-client tensor trees and packing rules. Imports nothing else of the package but ``registry``
and ``errors``, so norms, algorithms and the engine can all depend on it."""

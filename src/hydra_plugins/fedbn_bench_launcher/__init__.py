"""fedbn-bench's local sweep launcher (``hydra/launcher=joblib``, see ``process_launcher``)."""

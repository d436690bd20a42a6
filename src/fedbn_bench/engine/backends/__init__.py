"""Local-training backends: ``loop`` (the readable reference), ``vmap`` and ``packed`` (the round's
clients as one stack). Each computes forward/backward only; the algorithm's hooks do the rest."""

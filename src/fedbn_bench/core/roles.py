"""User roles of FedRBN (Hong et al. §3): users that train adversarially and users that do not."""

ADVERSARIAL = "adversarial"
"""An AT user: adversarial training with the adversarial BN branch (FedRBN's source of robustness)."""
STANDARD = "standard"
"""An ST user: standard training; under FedRBN it receives propagated adversarial statistics."""
ROLES = (STANDARD, ADVERSARIAL)

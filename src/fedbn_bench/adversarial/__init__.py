"""Adversarial robustness (FedRBN, Hong et al.): L∞ attacks in [0, 1] pixel space, adversarial
training objectives with user roles, and the stronger evaluation attacks of ``torchattacks``."""
